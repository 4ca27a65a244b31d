"""How well predicted schedule times match real execution, on the CPU.

Each example model (the small ones at the sizes in SIZES, and the LARGE ones, whose ops
take at least half a millisecond) is profiled on two emulated devices (``cpu:0`` and ``cpu:1``,
one thread each, on this machine's cores), then many schedules of it (heuristics
and random mappings, for latency and for throughput over 4 inputs with batch sizes
1, 2 and 4) are executed for real. Reported per model and objective: the Pearson
and Spearman correlations between predicted and measured makespans, and the median
ratio measured / predicted and the median of |measured / predicted - 1|, Spearman rho over
the schedules whose predictions are at least 10% apart (the issue's goal), how far the
schedule predicted best is from the measured best, and how many runs gave the unscheduled
model's outputs (:func:`mapsched.harness.outputs_match`); the script exits with status 1
if any did not. With ``--calibrate``, each model is first calibrated on the latency
objective (:func:`mapsched.harness.calibrate`: six schedules run and fitted), and the
same figures follow for the calibrated predictions
(:func:`mapsched.harness.calibrate.predict`), the throughput rows with the latency fit's
terms; the six fitted schedules are partly among the latency schedules scored (HEFT,
MET, CPOP), so those rows are partly in-sample. ``--compile none,jit`` profiles and runs
every model both ways (:mod:`mapsched.harness.lean`: op by op from Python, or a frozen
TorchScript trace per task and batch size), the setting in the prediction column.

    python benchmarks/bench_harness.py --random 12 --warmup 3 --repeats 5 [--calibrate] [--compile none,jit]

``--as-cli`` follows the README's flow with default options instead: ``mapsched profile``
calibrates the problem of each objective on its own runs (:func:`mapsched.harness.calibrate`
with its defaults), the schedules are solved on the calibrated problem, and their
makespans there are the predictions (the rows' prediction ``profile's default``); the
rows ``--no-calibrate`` predict the same schedules by the profiled times alone, and the
throughput rows ``latency fit`` by the latency problem's fitted terms. ``--fit-schedules``
and ``--fit-repeats`` change what each calibration runs. ``--rounds R`` executes every
schedule R times, in rounds over all of a row's schedules, and scores the median: a slow
spell of the machine then falls on one measurement of several schedules instead of on the
only one of a schedule. ``--noise`` adds the median |second / first - 1| over the first two
executions (a second round after all of them, where R is 1): what the same measurement
gives twice, the error even a perfect prediction would show. Where several schedules are
predicted equally fast, the first listed is scored as the predicted best, and the column says
how many tie and how the best of them measured. With a calibration, the last column is the
median over the scored schedules that place every job as one of the calibration's schedules
of the scoring's measurement over the calibration's: the same placement minutes apart, how far
the machine moved between fitting and scoring (1.000: not at all).
By default each schedule is executed as ``mapsched run`` executes it (one warm-up run,
then at least 3 timed runs and more, up to 50, until they add up to 100 ms); with
``--as-cli`` the models are profiled with ``mapsched profile``'s defaults too.

On a machine with a GPU, ``--devices cpu,cuda:0`` measures a real CPU and GPU instead.
``--save FILE`` writes, per model, objective and setting, one JSON line with the profiled
problem, the calibration's schedules and measured makespans (with ``--as-cli``), and the
scored schedules with theirs (and, with ``--noise``, their second measurement): what refitting
the terms offline needs, without the machine. ``--assembly`` ends with a table of the
methods' schedules (not the random ones) with the ms each device's thread spent assembling
its jobs' inputs (:attr:`mapsched.harness.Execution.assembly`): slices, concatenations,
copies from the other device, which the problem's times do not hold.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

import mapsched
from mapsched.harness import COMPILE, calibrate, default_threads, execute, outputs_match, profile, trace
from mapsched.harness.calibrate import predict, schedule_key
from mapsched.harness.models import FACTORIES, LARGE
from mapsched.harness.profile import MAX_SPREAD

LATENCY = ("heft", "cpop", "met", "greedy", "single-best")
# Larger than the test defaults, so that tasks take milliseconds and the engine's
# fixed cost per job (tens of microseconds of Python) does not dominate.
SIZES = {"resnet": {"width": 32, "image": 64}, "inception": {"width": 16, "image": 64},
         "random-wired": {"n": 12, "width": 32, "image": 32}, "transformer": {"d_model": 256, "tokens": 64}}
THROUGHPUT = ("bheft", "bmet", "bgreedy", "single-best")


def spread_rho(pred: np.ndarray, meas: np.ndarray) -> tuple[float, int]:
    """Spearman rho over the schedules whose predictions are at least 10% apart (the goal's
    subset): the fastest predicted, then each next one at least 1.1 times the last kept."""
    keep, last = [], 0.0
    for i in np.argsort(pred):
        if not keep or pred[i] >= 1.1 * last:
            keep.append(i)
            last = pred[i]
    rho = spearmanr(pred[keep], meas[keep]).statistic if len(keep) > 2 else float("nan")
    return float(rho), len(keep)


def mapping(s: mapsched.Schedule) -> tuple:
    """A schedule's placement of every job, whatever its times."""
    return tuple(sorted((j.task, j.device, tuple(j.inputs)) for j in s.jobs))


def drift(scheduled: list[mapsched.Schedule], meas: np.ndarray, report) -> str:
    """The median, over the scored schedules that place every job as a schedule the
    calibration ran, of the scoring's measurement over the calibration's (the same
    placement, minutes apart): how much the machine moved in between. '-' without one."""
    if report is None:
        return "-"
    then = {mapping(s): m for s, m in zip(report.schedules, report.measured)}
    ratios = [m / then[mapping(s)] for s, m in zip(scheduled, meas) if mapping(s) in then]
    return f"{np.median(ratios):.3f} ({len(ratios)})" if ratios else "-"


def best_of_predicted(pred: np.ndarray, meas: np.ndarray) -> str:
    """The predicted best's measurement over the measured best: the first listed of
    equal predictions, with how many tie and the best of them where several do."""
    tied = np.flatnonzero(pred <= pred.min() * (1 + 1e-9))
    first = f"{meas[tied[0]] / meas.min():.3f}"
    return first if len(tied) == 1 else f"{first} (tie of {len(tied)}, best {meas[tied].min() / meas.min():.3f})"


def schedules(p: mapsched.Problem, methods: tuple[str, ...], randoms: int) -> list[mapsched.Schedule]:
    """The methods' schedules, then the random mappings', each distinct schedule once: two
    methods that give the same jobs (every task on the GPU, say) would otherwise be two rows
    whose measured difference is noise alone, and could make the predicted best look wrong."""
    made = [mapsched.solve(p, m) for m in methods]
    made += [mapsched.solve(p, "random", seed=s, samples=1) for s in range(randoms)]
    out, seen = [], set()
    for s in made:
        if schedule_key(s) not in seen:
            seen.add(schedule_key(s))
            out.append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=12, help="random mappings per model and objective")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed executions per schedule, median kept (default: execute's, as 'mapsched run')")
    ap.add_argument("--warmup", type=int, default=1, help="untimed executions first (default 1, as 'mapsched run')")
    ap.add_argument("--batch", type=int, default=4, help="inputs of the throughput objective")
    ap.add_argument("--devices", default="cpu:0,cpu:1", help="e.g. cpu,cuda:0 on a machine with a GPU")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads per device (default: mapsched profile's, the cores shared among "
                         "emulated devices)")
    ap.add_argument("--calibrate", action="store_true", help="also score calibrated predictions")
    ap.add_argument("--as-cli", action="store_true",
                    help="predict as the README's flow does: the profile calibrated as 'mapsched profile' does "
                         "by default, and the schedules solved on it")
    ap.add_argument("--compile", default="none",
                    help=f"comma-separated settings to profile and run each model with, of {', '.join(COMPILE)}")
    ap.add_argument("--fit-schedules", type=int, default=None,
                    help="schedules each calibration runs (default: calibrate's, as the CLI)")
    ap.add_argument("--fit-repeats", type=int, default=None,
                    help="timed executions per calibration schedule (default: calibrate's, as the CLI)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="executions of every schedule, in rounds over all of them; the median is scored")
    ap.add_argument("--noise", action="store_true",
                    help="add the median |second / first - 1| of every schedule's first two executions (a second "
                         "round, after all of them, where --rounds is 1): the error a perfect prediction would show")
    ap.add_argument("--models", default=",".join([*FACTORIES, *LARGE]),
                    help=f"comma-separated, of {', '.join([*FACTORIES, *LARGE])}")
    # 0.5, not profile's 0.25, without --as-cli: at 0.25 the quiet 2-core machine's Inception profile
    # was refused once (2 of 90 measurements at 0.27 after re-measuring); an H200 machine's CPU refused 0.52.
    ap.add_argument("--max-spread", type=float, default=None,
                    help="profile's threshold on the spread of each measurement, which it re-measures and "
                         "refuses beyond (default: with --as-cli profile's, else 0.5)")
    ap.add_argument("--save", help="JSON lines file for the problems, schedules and measurements of every row")
    ap.add_argument("--assembly", action="store_true",
                    help="then a table of the methods' schedules: predicted, measured, and the ms each device's "
                         "thread spent assembling inputs (the first round's run), which no task's time holds")
    args = ap.parse_args()
    devices = args.devices.split(",")
    torch.set_num_threads(args.threads or default_threads(devices) or torch.get_num_threads())
    settings = args.compile.split(",")
    if args.as_cli and args.calibrate:
        ap.error("--as-cli: its predictions are calibrated already; leave out --calibrate")
    if args.rounds < 1:
        ap.error(f"--rounds: expected at least 1, got {args.rounds}")
    if args.max_spread is None:
        args.max_spread = MAX_SPREAD if args.as_cli else 0.5
    if not args.max_spread > 0:
        ap.error(f"--max-spread: expected a positive number, got {args.max_spread}")
    if not set(settings) <= set(COMPILE):
        ap.error(f"--compile: expected settings of {', '.join(COMPILE)}, got {args.compile!r}")
    print("| model | objective | prediction | tasks | schedules | predicted (ms) | measured (ms) | Pearson r "
          "| Spearman rho | rho, 10% apart (schedules) | measured / predicted | median abs error "
          "| predicted best, measured / best | outputs equal |" + (" measured again |" if args.noise else "")
          + " scoring / calibration, same placement |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.noise else "")
          + "---:|")
    every, assembled = [], []
    wrong = 0
    if args.save:
        Path(args.save).write_text("")  # appended to row by row, so that a cut run keeps its rows
    for name in args.models.split(","):
        model = FACTORIES[name](**SIZES[name]) if name in FACTORIES else LARGE[name]()
        example = torch.randn(model.input_shape, generator=torch.Generator().manual_seed(0))
        # Traced once, so that the lean callables are built once per batch size, not per run.
        graph = trace(model, example)
        for setting in settings:
            # 'mapsched profile''s defaults with --as-cli; otherwise more passes, as before.
            passes = {} if args.as_cli else {"warmup": 3, "repeats": 10}
            base = profile(model, example, devices, [1, 2, 4], name=name, max_spread=args.max_spread,
                           compile=setting, **passes)
            one = torch.randn(1, *model.input_shape[1:], generator=torch.Generator().manual_seed(1))
            fit = {k: v for k, v in (("count", args.fit_schedules), ("repeats", args.fit_repeats)) if v is not None}
            # The CLI calibrates with calibrate's defaults; the other rows measure as the schedules are measured.
            kw = fit if args.as_cli else {"warmup": args.warmup, "repeats": args.repeats, **fit}
            terms, report = calibrate(graph, base, one, **kw) if args.calibrate or args.as_cli else (None, None)
            for objective, methods in ((mapsched.Objective(), LATENCY),
                                       (mapsched.Objective("throughput", args.batch), THROUGHPUT)):
                p = base.with_objective(objective)
                x = torch.randn(p.L, *model.input_shape[1:], generator=torch.Generator().manual_seed(1))
                with torch.inference_mode():
                    reference = model(x)
                # Each label's problem predicts the schedules (None: their makespans where solved).
                if args.as_cli:  # 'mapsched profile' writes the problem calibrated on its own objective
                    if p.L > 1:
                        solved, report = calibrate(graph, p, x, **fit)
                    else:
                        solved = terms
                    labels = {"profile's default": None, "--no-calibrate": p}
                    if p.L > 1:
                        labels["latency fit"] = terms.with_objective(objective)
                else:
                    solved = p
                    labels = {"profiled": None}
                    if terms is not None:
                        labels["calibrated"] = terms.with_objective(objective)
                preds, equal = {label: [] for label in labels}, 0
                scheduled = schedules(solved, methods, args.random)
                for s in scheduled:
                    for label, q in labels.items():
                        preds[label].append(s.makespan if q is None else predict(q, s))
                # Round by round over all the schedules, so that a slow spell of the machine
                # falls on one measurement of several schedules, not on every measurement of one.
                rounds = []
                for k in range(max(args.rounds, 2 if args.noise else 1)):
                    runs = [execute(graph, solved, s, x, warmup=args.warmup, repeats=args.repeats)
                            for s in scheduled]
                    rounds.append([run.makespan for run in runs])
                    if not k:
                        equal = sum(outputs_match(run.outputs, reference, devices) for run in runs)
                        assembly = [run.assembly for run in runs]
                wrong += len(scheduled) - equal
                table = np.array(rounds)
                meas_a = np.median(table[:args.rounds], axis=0)
                second = table[1] if len(table) > 1 else None
                again = f" {np.median(np.abs(second / table[0] - 1)):.1%} |" if args.noise else ""
                moved = drift(scheduled, meas_a, report)
                if args.save:
                    ran = zip(report.names, report.schedules, report.measured) if report else ()
                    record = {"model": name, "objective": objective.kind, "setting": setting, "problem": p.to_dict(),
                              "fit": [{"name": n, "schedule": s.to_dict(), "measured": m} for n, s, m in ran],
                              "scored": [{"schedule": s.to_dict(), "measured": float(m), "assembly": assembly[k],
                                          "rounds": [float(v) for v in table[:args.rounds, k]],
                                          **({} if second is None else {"again": float(second[k])})}
                                         for k, (s, m) in enumerate(zip(scheduled, meas_a))]}
                    with open(args.save, "a") as saved:
                        saved.write(json.dumps(record) + "\n")
                row = name if setting == "none" else f"{name}, {setting}"
                assembled += [(row, objective.kind, s.method, s.makespan, float(m), assembly[k])
                              for k, (s, m) in enumerate(zip(scheduled, meas_a)) if s.method != "random"]
                for label, values in preds.items():
                    pred_a = np.array(values)
                    if labels[label] is None:
                        every.append((pred_a, meas_a))
                    r = float(np.corrcoef(pred_a, meas_a)[0, 1])
                    rho = float(spearmanr(pred_a, meas_a).statistic)
                    apart, kept = spread_rho(pred_a, meas_a)
                    shown = label if setting == "none" else f"{label}, {setting}"
                    print(f"| {name} | {objective.kind} | {shown} | {p.n} | {len(meas_a)} "
                          f"| {pred_a.min():.2f} to {pred_a.max():.2f} | {meas_a.min():.2f} to {meas_a.max():.2f} "
                          f"| {r:.3f} | {rho:.3f} | {apart:.3f} ({kept}) | {np.median(meas_a / pred_a):.2f} "
                          f"| {np.median(np.abs(meas_a / pred_a - 1)):.1%} "
                          f"| {best_of_predicted(pred_a, meas_a)} | {equal}/{len(meas_a)} |{again} {moved} |",
                          flush=True)
    pred_all = np.concatenate([a for a, _ in every])
    meas_all = np.concatenate([b for _, b in every])
    print(f"\nall {len(pred_all)} schedules: Pearson r = {np.corrcoef(pred_all, meas_all)[0, 1]:.3f}, "
          f"Spearman rho = {spearmanr(pred_all, meas_all).statistic:.3f}; outputs differ in {wrong}")
    if args.assembly:
        print("\n| model | objective | schedule | predicted (ms) | measured (ms) | measured - predicted (ms) "
              f"| input assembly (ms: {', '.join(devices)}) |\n|---|---|---|---:|---:|---:|---|")
        for name, kind, method, pred, meas, spent in assembled:
            print(f"| {name} | {kind} | {method} | {pred:.2f} | {meas:.2f} | {meas - pred:+.2f} "
                  f"| {', '.join(f'{spent[d]:.2f}' for d in devices)} |")
    raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()
