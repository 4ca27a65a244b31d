"""Fit a problem's overhead terms to measured runs of a handful of schedules.

The terms that :func:`~mapsched.harness.profile` measures with empty jobs miss what
only shows when real jobs run side by side: devices that share the host's memory and
the Python interpreter slow each other down, and a consumer's wake-up costs more when
its producer's thread is busy. :func:`calibrate` runs a few diverse schedules for real
and fits three terms by least squares on the relative error of the makespan: one
per-job overhead for every device, one sync per cross-device dependency, and a factor
on the kernel times. A schedule's prediction under candidate terms is the decoder's
makespan of its mapping and device order: what :func:`~mapsched.harness.execute` does,
every job as soon as its inputs and its device are ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from mapsched import checks
from mapsched.errors import HarnessError, InfeasibleError
from mapsched.harness.execute import execute
from mapsched.harness.graph import CoarseGraph, example_inputs, trace
from mapsched.harness.lean import recorded_compile
from mapsched.harness.overheads import check_threads, refit
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.decoder import Decoder, as_owner, ready_order
from mapsched.solve import solve

__all__ = ["SCHEDULES", "CalibrationReport", "calibrate", "predict", "schedule_key", "schedules"]

SCHEDULES = 6
"""Default number of schedules to run: three terms, twice over."""

SCALE = (0.5, 20.0)
"""Bounds of the fitted kernel-time factor: kernels that run side by side slow down, and
a profile does not overstate them twice over."""

PRIOR = 0.05
"""Weight of the pull of the kernel scale towards 1, against relative makespan errors: a
scale of 2 must save over 5% of error somewhere to be chosen."""

ROUNDS = 3
"""Executions of every schedule, in rounds over all of them; the median is fitted. The
same schedule's executions a minute apart can differ severalfold on a shared machine, for a
whole execution of tens of runs; in rounds, such a spell falls on one
execution of several schedules, not on the only one of a schedule."""

REMEASURE = 0.08
"""A schedule whose measurement the first fit misses by more than this (relative) is
executed twice more, and the fit made again on the median of all its executions."""

PARALLEL = (0.9, 0.95)
""":meth:`CalibrationReport.serial` speaks up where the calibrated problem predicts the best
schedule on several devices at most 0.9 times the best on one, and it measures at least
0.95 times that."""


@dataclass(frozen=True)
class CalibrationReport:
    """What :func:`calibrate` measured and fitted.

    Attributes
    ----------
    names : tuple of str
        The schedules, by how they were made (``heft``, ``only cpu:0``, ``random:1``...).
    before, after, measured : tuple of float
        Per schedule, the predicted makespan under the given problem (its own makespan,
        as ``mapsched run`` prints it), under the calibrated one, and the measured one (ms).
    overhead, sync, scale : float
        The fitted terms: ms per job on every device, ms per cross-device dependency,
        factor on the kernel times.
    schedules : tuple of Schedule
        The schedules run, in the order of ``names`` (empty where not recorded).
    remeasured : tuple of str
        The schedules executed twice more, since the first fit missed them by more than
        ``REMEASURE`` (their ``measured`` is the median of all their executions).
    """

    names: tuple[str, ...]
    before: tuple[float, ...]
    after: tuple[float, ...]
    measured: tuple[float, ...]
    overhead: float
    sync: float
    scale: float
    schedules: tuple[Schedule, ...] = ()
    remeasured: tuple[str, ...] = ()

    @property
    def devices(self) -> tuple[int, ...]:
        """Per schedule, how many devices its jobs that take time use."""
        return tuple(len({j.device for j in s.jobs if j.end > j.start}) for s in self.schedules)

    def serial(self) -> str | None:
        """A one-line warning where the devices did not run side by side, else None.

        Where the best schedule on several devices is predicted (after the fit) at most
        ``PARALLEL[0]`` times the best on one device but measures at least ``PARALLEL[1]``
        times it, the devices gain nothing from working side by side: with tasks of tens
        of microseconds, Python's dispatch, which holds the interpreter lock, is most of
        the time. Predictions of schedules that use several devices are then optimistic,
        and no term of the fit can say so.
        """
        one = [k for k, d in enumerate(self.devices) if d == 1]
        many = [k for k, d in enumerate(self.devices) if d > 1]
        if not one or not many:
            return None
        pred = min(self.after[k] for k in many), min(self.after[k] for k in one)
        meas = min(self.measured[k] for k in many), min(self.measured[k] for k in one)
        if pred[0] > PARALLEL[0] * pred[1] or meas[0] < PARALLEL[1] * meas[1]:
            return None
        return (f"the devices did not run side by side: the best schedule on several devices measured "
                f"{meas[0]:.4g} ms against {meas[1]:.4g} ms on one, predicted {pred[0]:.4g} against "
                f"{pred[1]:.4g}; predictions that use several devices are optimistic here (tasks this short are "
                "Python-bound; larger batches, or --compile jit, may help)")

    @staticmethod
    def _median_ratio(pred: Sequence[float], meas: Sequence[float]) -> float:
        return float(np.median(np.array(meas) / np.maximum(np.array(pred), 1e-12)))

    def table(self) -> str:
        """The fitted terms, then per schedule: predicted before and after, measured, and the ratios."""
        lines = [f"fitted: overhead {self.overhead:.4g} ms per job, sync {self.sync:.4g} ms per cross-device "
                 f"dependency, kernel scale {self.scale:.4g}",
                 f"{'schedule':<16} {'before':>10} {'after':>10} {'measured':>10} {'meas/before':>11} "
                 f"{'meas/after':>10}"]
        for row in zip(self.names, self.before, self.after, self.measured):
            name, b, a, m = row
            lines.append(f"{name[:16]:<16} {b:>10.4g} {a:>10.4g} {m:>10.4g} {m / b if b > 0 else 0:>11.2f} "
                         f"{m / a if a > 0 else 0:>10.2f}")
        lines.append(f"median measured/predicted: {self._median_ratio(self.before, self.measured):.2f} before, "
                     f"{self._median_ratio(self.after, self.measured):.2f} after")
        if self.remeasured:
            lines.append(f"measured twice more (missed by over {REMEASURE:.0%} at first): "
                         f"{', '.join(self.remeasured)}")
        return "\n".join(lines)


def schedule_key(schedule: Schedule) -> tuple:
    """A schedule's jobs as a hashable key: equal keys, the same jobs at the same starts."""
    return tuple(sorted((j.task, j.device, tuple(j.inputs), round(j.start, 9)) for j in schedule.jobs))


def schedules(problem: Problem, count: int = SCHEDULES, seed: int = 0) -> list[tuple[str, Schedule]]:
    """Up to ``count`` distinct schedules that load the devices differently.

    HEFT; every task on one device, for each device that can run them all; MET and
    CPOP; then random mappings (seeds from ``seed``), until ``count`` or twice as many tries.
    For throughput, their batched forms: ``bheft``, ``bmet`` and ``bgreedy`` (there is
    no batched CPOP).
    """
    out: list[tuple[str, Schedule]] = []
    seen: set[tuple] = set()

    def add(name: str, make: object) -> None:
        if len(out) >= count:
            return
        try:
            s = make()  # type: ignore[operator]
        except InfeasibleError:  # a device that cannot hold every task, say
            return
        if schedule_key(s) not in seen:
            seen.add(schedule_key(s))
            out.append((name, s))

    first, *others = ("heft", "met", "cpop") if problem.L == 1 else ("bheft", "bmet", "bgreedy")
    add(first, lambda: solve(problem, first, seed=seed))
    for u, d in enumerate(problem.device_names):
        add(f"only {d}", lambda u=u, d=d: _decode(problem, np.full(problem.n, u), f"only:{d}"))
    for method in others:
        add(method, lambda method=method: solve(problem, method, seed=seed))
    for k in range(2 * count):  # one random mapping each: the best of many is often the same one
        add(f"random:{seed + k}", lambda k=k: solve(problem, "random", seed=seed + k, samples=1))
    return out


def _decode(problem: Problem, owner: np.ndarray, method: str) -> Schedule:
    return Decoder(problem).schedule(as_owner(problem, owner), method=method)


def _plan(problem: Problem, schedule: Schedule) -> tuple[np.ndarray, list[int]]:
    """A schedule's mapping, and a topological order that follows its starts (so its device orders)."""
    owner = np.zeros((problem.n, problem.L), dtype=np.int64)
    start = np.full(problem.n, np.inf)
    for j in schedule.jobs:
        i = problem.task_index[j.task]
        owner[i, list(j.inputs)] = problem.device_index[j.device]
        start[i] = min(start[i], j.start)
    return owner, ready_order(problem, -start)


def predict(problem: Problem, schedule: Schedule) -> float:
    """The makespan of ``schedule``'s mapping and order on ``problem``, each job as early as it can
    start: what :func:`~mapsched.harness.execute` does with it."""
    owner, order = _plan(problem, schedule)
    return float(Decoder(problem, order).schedule(owner).makespan)


def _candidate(problem: Problem, theta: Sequence[float]) -> Problem:
    o, s, k = (float(v) for v in theta)
    names = problem.device_names
    return refit(problem, dict.fromkeys(names, o), {(a, b): s for a in names for b in names if a != b}, k,
                 fitted=True)


def _errors(problem: Problem, theta: Sequence[float], runs: Sequence[Schedule], measured: np.ndarray) -> np.ndarray:
    """Each run's relative error, predicted under the terms ``theta`` against ``measured``."""
    q = _candidate(problem, theta)
    return np.array([predict(q, s) for s in runs]) / measured - 1.0


def _fit(problem: Problem, runs: Sequence[Schedule], measured: np.ndarray, x0: Sequence[float]) -> list[float]:
    """The terms (overhead, sync, scale) that fit ``runs``' predictions to ``measured`` from ``x0``."""
    from scipy.optimize import least_squares

    def residuals(theta: np.ndarray) -> np.ndarray:
        errors = _errors(problem, theta, runs, measured)
        # A weak pull of the scale towards 1: on a model of many alike tasks the scale and
        # the per-job overhead explain the same thing, and the overhead is what differs.
        return np.append(errors, PRIOR * (theta[2] - 1.0))

    span = float(measured.max())
    low, high = [0.0, 0.0, SCALE[0]], [span, span, SCALE[1]]
    fit = least_squares(residuals, np.clip(x0, low, high), bounds=(low, high), diff_step=1e-2,
                        x_scale=[max(span / 100, 1e-3), max(span / 100, 1e-3), 1.0])
    return [float(v) for v in fit.x]


def calibrate(model: nn.Module | CoarseGraph, problem: Problem, inputs: torch.Tensor | Sequence[torch.Tensor],
              *, count: int = SCHEDULES, cluster: bool = True, warmup: int = 1, repeats: int | None = None,
              rounds: int = ROUNDS, seed: int = 0, compile: str | None = None) -> tuple[Problem, CalibrationReport]:
    """Run a few schedules of ``problem`` for real and fit its overhead terms to their makespans.

    Parameters
    ----------
    model : nn.Module or CoarseGraph
        The profiled model, as for :func:`~mapsched.harness.execute`.
    problem : Problem
        Its problem, from :func:`~mapsched.harness.profile` (or an earlier calibration).
    inputs : Tensor or sequence of Tensors
        The model's inputs, with ``problem.L`` rows.
    count : int
        Schedules to run (see :func:`schedules`); at least 1, 3 or more to pin the three terms.
    cluster, warmup, repeats : bool, int, int or None
        As for :func:`~mapsched.harness.execute`, for each execution.
    rounds : int
        Executions of each schedule, in rounds over all of them (``ROUNDS``); the
        median of each schedule's executions is fitted.
    seed : int
        Seed of the HEFT, MET, CPOP and random schedules.
    compile : str, optional
        How each task runs, as for :func:`~mapsched.harness.execute`: by default as
        profiled; another setting is refused. The calibrated problem records it.

    Returns
    -------
    calibrated : Problem
        ``problem`` with the fitted terms in its times instead of those it recorded
        (the structure unchanged), and recorded in its ``calibration`` (``fitted`` true).
    report : CalibrationReport
        The terms, and per schedule the makespans predicted before and after, and measured.

    Notes
    -----
    Each schedule is executed ``rounds`` times, round by round over all of them, and its
    median execution fitted. The fit minimises the squared relative errors, so that every
    schedule counts alike, with SciPy's bounded least squares (the makespan is piecewise
    linear in the terms), the kernel factor bounded to ``SCALE`` and weakly pulled
    towards 1 (``PRIOR``); the terms start from the mean of those the problem recorded. A schedule
    the fit misses by more than ``REMEASURE`` is executed twice more and the fit made
    again on the median of all its executions: executions slowed by something else on
    the machine would otherwise pull every term.

    Examples
    --------
    >>> from mapsched.harness import default_threads, profile
    >>> from mapsched.harness.models import transformer
    >>> m = transformer()
    >>> x = torch.randn(m.input_shape)
    >>> torch.set_num_threads(default_threads(["cpu:0", "cpu:1"]))  # the two devices' threads apart
    >>> p = profile(m, x, ["cpu:0", "cpu:1"], repeats=1)
    >>> q, report = calibrate(m, p, x, count=3, repeats=1, rounds=1)
    >>> q.calibration.fitted, len(report.measured)
    (True, 3)
    """
    if not isinstance(problem, Problem):
        raise HarnessError(f"problem: expected the mapsched.Problem the model was profiled into (Problem.read), "
                           f"got {type(problem).__name__}")
    checks.count(count, "count", err=HarnessError)
    checks.count(rounds, "rounds", err=HarnessError)
    checks.count(seed, "seed", least=0, err=HarnessError)
    check_threads(problem)
    compile = recorded_compile(problem, compile)
    batch = example_inputs(inputs, "inputs")
    graph = model if isinstance(model, CoarseGraph) else trace(model, [x[:1] for x in batch], cluster)
    runs = schedules(problem, count, seed)
    # One untimed execution first: a fresh process runs its first executions slower (allocator,
    # library caches), which would make the first schedules look slow beyond their warm-up run.
    execute(graph, problem, runs[0][1], batch, warmup=0, repeats=max(1, warmup), compile=compile)
    def run(s: Schedule) -> float:
        return execute(graph, problem, s, batch, warmup=warmup, repeats=repeats, compile=compile).makespan

    times = [[] for _ in runs]
    for _ in range(rounds):
        for k, (_, s) in enumerate(runs):
            times[k].append(run(s))
    measured = np.array([np.median(t) for t in times])
    made = [s for _, s in runs]
    cal = problem.calibration
    x0 = [float(np.mean(list(cal.overhead.values()))) if cal and cal.overhead else 0.0,
          float(np.mean(list(cal.sync.values()))) if cal and cal.sync else 0.0,
          cal.scale if cal else 1.0]
    theta = _fit(problem, made, measured, x0)
    # Slow executions (another process, a core shared for a while) pull all three terms:
    # the schedules the fit misses most are measured twice more, and their median fitted.
    errors = _errors(problem, theta, made, measured)
    again = [k for k in range(len(runs)) if abs(errors[k]) > REMEASURE]
    for k in again:
        times[k] += [run(made[k]), run(made[k])]
        measured[k] = float(np.median(times[k]))
    if again:
        theta = _fit(problem, made, measured, theta)
    calibrated = _candidate(problem, theta)
    report = CalibrationReport(tuple(name for name, _ in runs), tuple(float(s.makespan) for _, s in runs),
                               tuple(predict(calibrated, s) for s in made), tuple(float(v) for v in measured),
                               *(float(v) for v in theta), tuple(made),
                               tuple(runs[k][0] for k in again))
    return calibrated, report
