"""``train``: train a learned method's policy (DOPPLER's, Placeto's on one problem; GiPH's on
one of its experiment sets) into a policy file, resumable."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from typing import Any

from mapsched.checks import count_arg, number_arg, probability_arg, seconds_arg
from mapsched.cli.common import MAX_TORCH_SEED, PROBLEM_HELP, Parser, ProgressBar, fmt, load_problem
from mapsched.engine import interrupt
from mapsched.errors import OptionError, shown
from mapsched.learned import MAX_EDGE_HIDDEN, MAX_HIDDEN, MAX_ROUNDS
from mapsched.model.files import check_output


def add_train(sub: Any) -> None:
    """The ``train`` command's parser."""
    tn = sub.add_parser(
        "train", help="train a learned method's policy on a problem (needs torch)",
        description="Train DOPPLER's SEL/PLC policy on a problem: Stage I (il) imitates critical-path on the "
                    "learner's own rollouts, Stage II (sim) is REINFORCE against the work-conserving model's "
                    "makespan; or Placeto's policy (placeto: stage sim only). The file keeps the best policy by "
                    "evaluation (for 'solve -m METHOD --policy FILE') and the last state (for --resume); it is "
                    "written every --checkpoint-every episodes and at the end. giph: REINFORCE of GiPH's gpNet "
                    "policy over a mixture of problem families (--families), one of GiPH's experiment sets (--suite) "
                    "or your problem files (--problems), keeping the best policy by mean SLR on evaluation cases.")
    tn.add_argument("method", choices=("doppler", "placeto", "giph"))
    tn.add_argument("problem", nargs="?", help=PROBLEM_HELP + " (doppler and placeto)")
    tn.add_argument("--suite", help="giph: train on one of GiPH's experiment sets, single, multi or multi-diff")
    tn.add_argument("--families", help="giph, doppler: train on a mixture of problem families (comma-separated, of "
                    "giph, giph-alt, random, layered, dnn, traced, wired; giph's default, without --suite or "
                    "--problems: giph,random,layered,dnn, as the shipped policy); doppler: for --devices devices, "
                    "instead of a problem file")
    tn.add_argument("--devices", type=count_arg(1, 1000),
                    help="doppler with --families: the device count of the policy (default 4)")
    tn.add_argument("--problems", nargs="+", metavar="FILE",
                    help="giph: train on these problem files (episodes draw one; evaluation runs them)")
    tn.add_argument("--init", help="giph: start from this policy (a file from 'train giph', or a shipped one: "
                    "mixture or multi-diff) instead of a new one; its network and features are kept")
    tn.add_argument("--variant", default="giph", choices=("giph", "ne", "task-eft"), help="giph: GiPH, GiPH-NE or "
                    "GiPH-task-EFT")
    tn.add_argument("--mp-rounds", type=count_arg(0, MAX_ROUNDS), default=0,
                    help="giph: k rounds of message passing (GiPH-k); 0: over the graph's depth (GiPH)")
    tn.add_argument("--giph-features", action="store_true",
                    help="giph: the paper's 4 node features only (default adds the finish-time potential, the slack "
                         "and their rank)")
    tn.add_argument("--lr", type=number_arg(most=10.0), default=0.01,
                    help="giph: Adam's learning rate (default 0.01; at most 10)")
    tn.add_argument("--entropy", type=number_arg(positive=False, most=100.0), default=0.0,
                    help="giph: entropy bonus weight (default 0; at most 100)")
    tn.add_argument("--gamma", type=probability_arg, default=0.8, help="giph: the discount (default 0.8; GiPH's 0.97)")
    tn.add_argument("--eval-every", type=count_arg(1), default=10, help="giph: episodes between evaluations")
    tn.add_argument("--eval-cases", type=count_arg(1, 1000), default=20, help="giph: held-out evaluation cases")
    tn.add_argument("-o", "--output", required=True, help="policy file to write (.pt)")
    tn.add_argument("--stages", help="doppler: il, sim or il,sim (default; real: not implemented yet); placeto: sim")
    tn.add_argument("--episodes", type=count_arg(1), default=100,
                    help="episodes per stage (default 100); giph: episodes in all")
    tn.add_argument("--seed", type=count_arg(0, MAX_TORCH_SEED), default=0)
    tn.add_argument("--time-limit", type=seconds_arg, default=None, help="seconds, start-up included")
    tn.add_argument("--hidden", type=count_arg(1, MAX_HIDDEN),
                    help="embedding width (default: doppler 128, placeto 32)")
    tn.add_argument("--rounds", type=count_arg(1, MAX_ROUNDS),
                    help="message-passing rounds (default: doppler 6, placeto 3)")
    tn.add_argument("--checkpoint-every", type=count_arg(0), default=25,
                    help="episodes between checkpoints (0: only at the end; default 25)")
    tn.add_argument("--resume", action="store_true",
                    help="continue the training saved in -o (same problem; --episodes counts from its start)")
    tn.set_defaults(handler=cmd_train)


def _defaults(method: str) -> dict[str, Any]:
    """What ``train METHOD`` reads where an option is left out: its parser's defaults, parsed."""
    ap = Parser(prog="mapsched")
    add_train(ap.add_subparsers(dest="command", parser_class=Parser))
    return vars(ap.parse_args(["train", method, "-o", "-"]))


_TRAIN_ONLY = {"giph": ("suite", "problems", "init", "variant", "mp_rounds", "giph_features", "lr", "entropy",
                        "gamma", "eval_every", "eval_cases"),
               "giph, doppler": ("families",),
               "doppler": ("devices",),
               "doppler, placeto": ("stages", "hidden", "rounds")}
"""The options of ``train`` that only some of its methods read."""


_CONFIG = {"hidden": "hidden", "rounds": "rounds", "variant": "variant", "mp_rounds": "rounds", "lr": "lr",
           "entropy": "entropy", "gamma": "gamma", "eval_every": "eval_every", "eval_cases": "eval_cases"}
"""The options of ``train`` that set a policy's config (the option's name: the config's)."""


def _resumed_config(args: argparse.Namespace, defaults: dict[str, Any], config: Any) -> None:
    """Refuse, with ``--resume``, an option given that would change the config the policy file
    keeps (its networks' sizes, its training's rates): it was set when the file was started."""
    for name, field in _CONFIG.items():
        given = getattr(args, name, None)
        if given is None or given == defaults.get(name) or not isinstance(config, dict) or field not in config:
            continue
        if given != config[field]:
            raise OptionError(f"--{name.replace('_', '-')}: {shown(args.output, quote=False)} keeps "
                              f"{shown(config[field])}, set when it was started; leave the option out with --resume, "
                              "or start a new file")


def _width(args: argparse.Namespace, method: str) -> dict[str, int]:
    """The network sizes given (``--hidden``, ``--rounds``) of a new policy, refusing a doppler
    width whose edge network (hidden^3 weights) would not fit in one line."""
    if method == "doppler" and args.hidden is not None and args.hidden > MAX_EDGE_HIDDEN:
        raise OptionError(f"--hidden: doppler's edge network has hidden^3 weights; give at most {MAX_EDGE_HIDDEN}, "
                          f"got {args.hidden}")
    return {k: v for k, v in (("hidden", args.hidden), ("rounds", args.rounds)) if v is not None}


def cmd_train(args: argparse.Namespace) -> int:
    """``train``: doppler or placeto on one problem file; giph on an experiment set (:func:`_train_giph`)."""
    from mapsched.learned import torch_module

    defaults = _defaults(args.method)
    for methods, names in _TRAIN_ONLY.items():
        for name in names:
            if args.method not in methods and getattr(args, name) != defaults[name]:
                raise OptionError(f"--{name.replace('_', '-')}: an option of {methods} training, which "
                                  f"{args.method} does not read; leave it out")
    if args.method == "giph":
        return _train_giph(args, defaults)
    if args.method == "doppler" and args.families is not None:
        return _train_doppler_families(args)
    if args.devices is not None:
        raise OptionError("--devices: a policy for one device count trains on --families; give them, or leave "
                          "--devices out")
    if args.problem is None or args.suite is not None:
        raise OptionError(f"problem: {args.method} trains on one problem file (no --suite); give it")
    method = args.method
    learner = torch_module(method, method)
    reinforce = torch_module("reinforce", method)
    stages = learner.parse_stages(",".join(learner.STAGES) if args.stages is None else args.stages)
    if args.resume and not os.path.isfile(args.output):
        raise OptionError(f"--resume: no policy file {shown(args.output)} to resume; leave out --resume to start one")
    check_output(args.output, [args.problem])
    problem = load_problem(args.problem)
    if problem.objective.kind != "latency":
        raise OptionError(f"problem: {method} trains on latency problems only; this one's objective is throughput")
    # Kept back from the time limit: the last evaluation, writing the file and the exit.
    deadline = math.inf if args.time_limit is None else args.started + args.time_limit - 0.4
    with reinforce.one_thread():
        if args.resume:
            data = reinforce.load_checkpoint(args.output, method, problem.m, flag="--resume")
            _resumed_config(args, defaults, data["config"])
            trainer = learner.Trainer.from_checkpoint(problem, data, args.seed, resume=True, flag="--resume")
        else:
            trainer = learner.Trainer(problem, learner.Config(**_width(args, method)), args.seed)

        def save() -> None:
            reinforce.save_checkpoint(args.output, trainer.checkpoint(stages, args.episodes))

        with ProgressBar(f"train {method}, best", args.time_limit) as bar, interrupt.graceful():
            def progress(stage: str, done: int, best: float) -> None:
                bar.method = f"train {method} {stage} {done}/{args.episodes}, best"
                if best < math.inf:
                    bar(time.perf_counter() - args.started, best)

            trainer.until = deadline  # rollouts stop there, the first evaluation's too (2,000 tasks: tens of s)
            try:
                if trainer.best_policy is None:
                    trainer.evaluate()
                if trainer.best_makespan == math.inf:  # no rollout finished: is there a mapping at all?
                    from mapsched.scheduling.construct import repaired_owner
                    from mapsched.scheduling.feasibility import NotFound

                    try:  # refused only where none exists (InfeasibleError, a proof)
                        with interrupt.until(deadline):
                            repaired_owner(problem)
                    except NotFound:  # no proof either way: the rollouts may still find one
                        pass
                trainer.run(stages, args.episodes, deadline, progress, save, args.checkpoint_every,
                            stop=interrupt.requested)
            except reinforce.Cut:  # mid-rollout at the deadline: the best policy so far stands
                pass
            except reinforce.Diverged:
                raise OptionError(f"train: {method}'s policy diverged after {sum(trainer.done.values())} episodes "
                                  "(its action probabilities are no longer finite); train again with another "
                                  "--seed") from None
            stopped = interrupt.requested()
        save()
    done = sum(trainer.done[s] for s in stages)
    note = " (interrupted)" if stopped else " (time limit)" if done < len(stages) * args.episodes else ""
    if trainer.best_policy is None:
        note += ", before its first evaluation ended: the file holds the policy as it started"
    print(f"trained {method} {', '.join(f'{s} {trainer.done[s]}/{args.episodes}' for s in stages)} episodes{note}: "
          f"greedy policy {fmt(trainer.eval_makespan, 6)} ms, best assignment seen {fmt(trainer.best_makespan, 6)} "
          f"ms; wrote {args.output}")
    return 130 if stopped else 0


def _train_giph(args: argparse.Namespace, defaults: dict[str, Any]) -> int:
    """``train giph``: REINFORCE over a family mixture, problem files or a GiPH experiment set
    (:mod:`mapsched.learned.giph_training`), from a new policy or ``--init``'s."""
    from mapsched.learned import torch_module

    giph = torch_module("giph", "giph")
    training = torch_module("giph_training", "giph")
    reinforce = torch_module("reinforce", "giph")
    if args.problem is not None:
        raise OptionError("problem: giph trains on many problems, not one; give them with --problems FILE ..., "
                          "or train on --families or a --suite")
    given = [flag for flag, v in (("--suite", args.suite), ("--families", args.families),
                                  ("--problems", args.problems)) if v is not None]
    if len(given) > 1:
        raise OptionError(f"{given[1]}: giph trains on one of --suite, --families or --problems; give one")
    if args.suite is not None and args.suite not in ("single", "multi", "multi-diff"):
        raise OptionError(f"--suite: giph trains on GiPH's sets single, multi or multi-diff, not {shown(args.suite)}")
    if args.resume and not os.path.isfile(args.output):
        raise OptionError(f"--resume: no policy file {shown(args.output)} to resume; leave out --resume to start one")
    if args.resume and args.init is not None:
        raise OptionError("--init: --resume continues the file's own training; leave --init out")
    if args.init is not None:
        from mapsched.learned.starts import check_policy_file

        check_policy_file(args.init, "giph", "--init")
    check_output(args.output, [*(args.problems or []), *([args.init] if args.init else [])])
    if args.problems is not None:
        source = training.ProblemSet([load_problem(f) for f in args.problems], args.eval_cases)
    elif args.suite is not None:
        source = training.GiphSet(args.suite, args.eval_cases)
    else:
        from mapsched.instances.families import TRAINING, parse_families

        source = training.FamilyMix(TRAINING if args.families is None else parse_families(args.families),
                                    args.eval_cases)
    deadline = math.inf if args.time_limit is None else args.started + args.time_limit - 0.4
    with reinforce.one_thread():
        if args.resume:
            data = reinforce.load_checkpoint(args.output, "giph", None, flag="--resume")
            _resumed_config(args, defaults, data["config"])
            trainer = training.Trainer.resume(data, source)
        elif args.init is not None:
            for name in ("variant", "mp_rounds", "giph_features"):
                if getattr(args, name) != defaults[name]:
                    raise OptionError(f"--{name.replace('_', '-')}: --init's policy sets the network; leave it out")
            net, _ = giph.load_policy(args.init, flag="--init")
            cfg = dataclasses.replace(net.cfg, lr=args.lr, entropy=args.entropy, gamma=args.gamma,
                                      eval_every=args.eval_every, eval_cases=args.eval_cases)
            net.cfg = cfg
            net.train()
            trainer = training.Trainer(cfg, source, args.seed, net=net)
        else:
            cfg = giph.Config(variant=args.variant, rounds=args.mp_rounds, lr=args.lr, entropy=args.entropy,
                              gamma=args.gamma, eval_every=args.eval_every, eval_cases=args.eval_cases,
                              node_features=giph.GIPH_NODE_FEATURES if args.giph_features else giph.NODE_FEATURES)
            trainer = training.Trainer(cfg, source, args.seed)

        def save() -> None:
            reinforce.save_checkpoint(args.output, trainer.checkpoint())

        with ProgressBar("train giph, evaluation", args.time_limit) as bar, interrupt.graceful():
            def progress(done: int, best: float) -> None:
                bar.method = f"train giph {done}/{args.episodes}, evaluation"
                bar(time.perf_counter() - args.started, best)

            trainer.run(args.episodes, deadline, progress, save, args.checkpoint_every, stop=interrupt.requested)
            stopped = interrupt.requested()
        save()
    note = " (interrupted)" if stopped else " (time limit)" if trainer.done < args.episodes else ""
    cut = len(trainer.eval_cases) - trainer.evaluated
    cases = f" on {trainer.evaluated} of {len(trainer.eval_cases)} cases (the time limit)" if cut else ""
    unit = "SLR" if isinstance(source, training.GiphSet) else "ratio to heft"
    print(f"trained giph {trainer.done}/{args.episodes} episodes on {trainer.suite}{note}: best evaluation {unit} "
          f"{fmt(trainer.eval_slr, 4)}{cases}; wrote {args.output}")
    return 130 if stopped else 0


def _train_doppler_families(args: argparse.Namespace) -> int:
    """``train doppler --families``: DOPPLER's policies for one device count, across problem
    families (:class:`mapsched.learned.doppler.FamilyTrainer`)."""
    from mapsched.instances.families import parse_families
    from mapsched.learned import torch_module

    doppler = torch_module("doppler", "doppler")
    reinforce = torch_module("reinforce", "doppler")
    if args.problem is not None:
        raise OptionError("problem: doppler with --families trains on the families' problems; leave the file out")
    if args.resume:
        raise OptionError("--resume: training across families does not resume; start a new file")
    families = parse_families(args.families)
    stages = doppler.parse_stages(",".join(doppler.STAGES) if args.stages is None else args.stages)
    check_output(args.output, [])
    width = _width(args, "doppler")
    deadline = math.inf if args.time_limit is None else args.started + args.time_limit - 0.4
    with reinforce.one_thread():
        trainer = doppler.FamilyTrainer(families, args.devices or 4, doppler.Config(**width), args.seed)

        def save() -> None:
            reinforce.save_checkpoint(args.output, trainer.checkpoint(stages, args.episodes))

        with interrupt.graceful():
            trainer.until = deadline
            try:
                trainer.evaluate()
                trainer.run(stages, args.episodes, deadline, None, save, args.checkpoint_every,
                            stop=interrupt.requested)
            except reinforce.Cut:
                pass
            stopped = interrupt.requested()
        save()
    print(f"trained doppler for {trainer.devices} devices on {','.join(families)}, "
          f"{', '.join(f'{s} {trainer.done[s]}/{args.episodes}' for s in stages)} episodes: best evaluation ratio to "
          f"critical-path {fmt(trainer.eval_makespan, 4)}; wrote {args.output}")
    return 130 if stopped else 0
