"""``generate``: write a seeded synthetic problem (a stack, a random DAG, a DNN model's graph,
DOPPLER's workloads, GiPH's graphs and experiment sets)."""

from __future__ import annotations

import argparse
from typing import Any

from mapsched.checks import count_arg, number_arg, probability_arg
from mapsched.cli.common import CONTENTION_HELP, contention_arg
from mapsched.errors import OptionError, ProblemError, shown
from mapsched.model.files import check_output
from mapsched.model.problem import MAX_DEVICES, Objective

MAX_SIZE = 10**7
"""The most tasks, modules, nodes, channels or layers ``generate`` takes: a problem of more
tasks does not fit in memory, and a larger count overflowed NumPy's array sizes."""
MAX_GENERATED = 10**6
"""The most tasks ``generate`` builds, whatever the counts that multiply to them: 100,000 take
tens of seconds on a slow machine, and 10^14 (each count within MAX_SIZE) ran until memory ran
out."""
DOPPLER_KINDS = ("chainmm", "ffnn", "llama-block", "llama-layer")
"""DOPPLER's workloads (``mapsched.generators.doppler``), sharded over ``--devices`` GPUs."""


def add_generate(sub: Any) -> None:
    """The ``generate`` command's parser."""
    g = sub.add_parser("generate", help="write a seeded synthetic problem (mapsched.problem/1)")
    g.add_argument("kind", choices=("stack", "random-dag", "vgg", "resnet", "inception", "transformer", "gpt3",
                                    "transformer-train", *DOPPLER_KINDS, "giph"))
    g.add_argument("-o", "--output", required=True)
    g.add_argument("--seed", type=count_arg(0), default=0)
    g.add_argument("--batch", type=count_arg(1), default=1, help="inputs L; above 1 the objective is throughput")
    g.add_argument("--modules", type=count_arg(1, MAX_SIZE), default=1, help="stack: modules")
    g.add_argument("--nodes", type=count_arg(1, MAX_SIZE), default=10, help="stack: nodes per module (N)")
    g.add_argument("--channels", type=count_arg(1, MAX_SIZE), default=1,
                   help="stack: edges between consecutive modules")
    g.add_argument("--variant", choices=("sdep", "wdep"), default="sdep", help="stack: channel wiring")
    g.add_argument("--graph", choices=("er", "ws", "ba"), default="er", help="stack: random graph model")
    g.add_argument("--system", default=None,
                   help="system preset (default cpu-t4-a100; gpt3: multi-node unless given; chainmm, ffnn, "
                        "llama-block, llama-layer: identical GPUs unless given; not for random-dag, giph)")
    g.add_argument("--layers", type=count_arg(1, MAX_SIZE), default=12,
                   help="gpt3, transformer-train: decoder layers")
    g.add_argument("--tasks", type=count_arg(1, MAX_SIZE), default=None,
                   help="random-dag: tasks (default 1000); giph: GiPH's size knob v (default 10), about v + "
                        "sqrt(v) / (2 alpha) + 2 tasks (18 for v = 10 at alpha 0.3, 64 for v = 50)")
    g.add_argument("--devices", type=count_arg(1, MAX_DEVICES), default=None,
                   help="random-dag: devices (default 4); chainmm, ffnn, llama-block, llama-layer: the GPUs they are "
                        "sharded over (identical GPUs unless --system; default 4); giph: devices (default 20)")
    g.add_argument("--contention", type=contention_arg, default=None,
                   help=CONTENTION_HELP + "; or 'hardware', the contention of the --system preset's hardware "
                                          "(PCIe and NVLink links one transfer per direction, GPUs two copy "
                                          "engines); default none")
    g.add_argument("--alpha", type=number_arg(), default=0.3, help="giph: graph shape (0.1 deep .. 0.3 wider)")
    g.add_argument("--conn-prob", type=probability_arg, default=0.1, help="giph: edge probability to earlier levels")
    g.add_argument("--type-prob", type=probability_arg, default=0.2,
                   help="giph: probability that a device supports each of the 5 hardware types")
    g.add_argument("--network-seed", type=count_arg(0), default=None, help="giph: the network's seed (default --seed)")
    g.add_argument("--experiment", choices=("single", "multi", "multi-diff", "adapt"),
                   help="giph: write case --case of GiPH's experiment set (graph x network, graph-major); the "
                        "size and shape options are then the set's")
    g.add_argument("--split", choices=("train", "test"), default="test", help="giph --experiment: which split")
    g.add_argument("--case", type=count_arg(0), default=0, help="giph --experiment: the case's index")
    g.set_defaults(handler=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    """``generate``: write a seeded synthetic problem of the kind asked for."""
    from mapsched import generators

    check_output(args.output)
    # About how many tasks each kind builds from its counts (a layer: 12 ops of GPT-3's forward
    # pass, 1,576 of transformer-train's step).
    tasks = {"stack": (args.modules * args.nodes, "--modules x --nodes"), "random-dag": (args.tasks or 0, "--tasks"),
             "giph": (args.tasks or 0, "--tasks"), "gpt3": (12 * args.layers, "--layers"),
             "transformer-train": (1576 * args.layers, "--layers")}.get(args.kind)
    if tasks is not None and tasks[0] > MAX_GENERATED:
        raise OptionError(f"{tasks[1]}: about {tasks[0]:,} tasks; generate builds at most {MAX_GENERATED:,}, so give "
                          "smaller counts")
    objective = Objective("throughput", args.batch) if args.batch > 1 else Objective()
    if args.system is not None and args.kind in ("giph", "random-dag"):
        raise OptionError(f"--system: {args.kind} draws its own devices; leave --system out (--devices sets their "
                          "number)")
    given = generators.platform(args.system) if args.system is not None else None
    preset = given if given is not None else generators.platform("cpu-t4-a100")
    try:
        if args.kind == "giph":
            if args.batch > 1:
                raise OptionError("--batch: GiPH's workloads are latency problems (one input); leave --batch at 1")
            p = _giph(args)
        elif args.kind == "random-dag":
            p = generators.random_dag(args.tasks or 1000, args.devices or 4, args.seed, objective=objective)
        elif args.kind in ("vgg", "resnet", "inception", "transformer"):
            p = getattr(generators, args.kind)(platform=preset, objective=objective, seed=args.seed)
        elif args.kind == "transformer-train":
            if args.batch > 1:
                raise OptionError("--batch: transformer-train is one training step (latency); its batch of 8 sequences "
                                  "is inside the op shapes")
            p = generators.transformer_train(args.layers, platform=preset, seed=args.seed)
        elif args.kind in DOPPLER_KINDS:
            if args.batch > 1:
                raise OptionError(f"--batch: {args.kind} is one forward pass (latency), its batch inside the op shapes")
            p = getattr(generators, args.kind.replace("-", "_"))(args.devices or 4, platform=given, seed=args.seed)
        elif args.kind == "gpt3":
            p = generators.gpt3(args.layers, platform=given, objective=objective, seed=args.seed)
        else:
            p = generators.stack(args.modules, args.nodes, args.channels, args.variant, args.graph, args.seed,
                                 preset, objective)
    except ProblemError as exc:  # a generated problem's field, where the user gave --batch
        if args.batch > 1 and "objective.batch" in str(exc):
            raise OptionError(f"--batch: the generated devices cannot run {args.batch} inputs of every task "
                              f"({exc}); give a smaller --batch") from None
        raise
    if args.contention:
        if args.contention.get("hardware"):
            from mapsched.generators.costs import hardware_contention

            p = hardware_contention(p)
        else:
            p = p.with_contention(**args.contention)
    p.write(args.output)
    print(f"wrote {p!r} to {shown(args.output, quote=False)}")
    return 0


def _giph(args: argparse.Namespace) -> Any:
    """``generate giph``: one graph on one network, or case ``--case`` of an experiment set."""
    from mapsched.generators import giph

    if args.experiment is None:
        for flag, seed in (("--seed", args.seed), ("--network-seed", args.network_seed)):
            if seed is not None and seed > giph.MAX_SEED:
                raise OptionError(f"{flag}: GiPH's generator takes a seed from 0 to {giph.MAX_SEED}, got {seed}")
        try:
            return giph.giph_instance(args.tasks or 10, args.alpha, args.conn_prob, args.seed, args.devices or 20,
                                      args.network_seed, args.type_prob)
        except OptionError as exc:  # named as its Python argument: the option given here instead
            name, _, rest = str(exc).partition(": ")
            if name in ("alpha", "conn_prob", "type_prob"):
                raise OptionError(f"--{name.replace('_', '-')}: {rest}") from None
            raise
    if args.experiment == "adapt":
        nets, _, graphs = giph.giph_adapt()
        total = len(graphs) * len(nets)
        if args.case >= total:
            raise OptionError(f"--case: adapt has {total} cases (graph x network version, graph-major); "
                              f"give 0..{total - 1}")
        g, k = divmod(args.case, len(nets))
        return giph.giph_problem(graphs[g], nets[k], name=f"giph-adapt-g{g}-v{k}")
    exp = giph.giph_experiment(args.experiment)
    graphs, nets = exp.specs(args.split, "graphs"), exp.specs(args.split, "networks")
    total = len(graphs) * len(nets)
    if args.case >= total:
        raise OptionError(f"--case: {args.experiment} {args.split} has {total} cases (graph x network, "
                          f"graph-major); give 0..{total - 1}")
    g, k = divmod(args.case, len(nets))
    return giph.giph_problem(giph.giph_graph(**graphs[g]), giph.giph_network(**nets[k]))
