"""The built-in benchmark suites of ``mapsched bench SUITE`` (``--suites FILE`` reads others).

Each suite lists its instances as generator recipes, the methods to compare and the
time limit each method gets per instance (``BOUND`` computes the full lower bound, the
seed paper's LBound column, in that time). Methods that are not registered (or do not
handle the suite's objective) are left out, so suites grow as methods land.
"""

from mapsched import instances
from mapsched.bench.sweep import BOUND, Case, Suite
from mapsched.generators import giph_instance, random_wired, stack
from mapsched.model.problem import Objective

LATENCY_METHODS = ("single-best", "met", "greedy", "heft", "ea", "sa", "exact", "split", BOUND)
THROUGHPUT_METHODS = ("single-best", "bmet", "bgreedy", "bheft", "ea", "sa", "exact", "split", BOUND)
REAL_MODELS = tuple(f"real/{model}-{grain}" for grain in ("layer", "op")
                    for model in ("resnet50", "inception-v3", "bert", "gnmt")) + (
    "real/resnet50-train-op",
    *(f"real/gpt{layers}-step-{system}" for layers in (12, 22) for system in ("cpu-t4-a100", "4-gpu-server")))
"""The instances of the ``real-models`` suite (``mapsched.instances``; ``docs/real-models.md``)."""
STACKS = [(1, "sdep")] + [(c, v) for v in ("sdep", "wdep") for c in (2, 3, 4)]


def _stack_cases(objective=None, seed=0):
    return tuple(
        Case(f"{'1-chan' if c == 1 else f'{v}, {c}-chan'}", stack,
             {"modules": 10, "n": 10, "channels": c, "variant": v, "seed": seed, "objective": objective})
        for c, v in STACKS)


SUITES = {
    "paper-latency": Suite(
        "paper-latency", _stack_cases(), LATENCY_METHODS, time_limit=45.0,
        options={"split": {"module_time_limit": 5.0}},
        description="Table I of the seed paper: 10-module ER(0.2) stacks, latency (ms)"),
    "paper-throughput": Suite(
        "paper-throughput", _stack_cases(Objective("throughput", 16)), THROUGHPUT_METHODS, time_limit=45.0,
        description="Table IV of the seed paper: the same stacks, throughput with B=16"),
    "giph": Suite(
        "giph", tuple(Case(f"v{v}-a{a}-p{p}-net{k % 10}", giph_instance,
                           {"v": v, "alpha": a, "conn_prob": p, "seed": 25, "m": 20, "network_seed": k % 10})
                      for k, (a, v, p) in enumerate((a, v, p) for a in (0.1, 0.2, 0.3) for v in (10, 15)
                                                    for p in (0.1, 0.2))),
        ("random", "random-eft", "heft", "cp-search", "sa", "exact", BOUND), time_limit=10.0,
        options={"random": {"samples": 0, "evaluator": "simulate"}},
        description="GiPH's test graphs (seed 25, one per point of its grid) on its networks (seeds 0-9, 20 "
                    "devices); random: best of 2|V| mappings run by the work-conserving model; the SLR table "
                    "is GiPH's metric"),
    "real-models": Suite(
        "real-models", tuple(Case(name[len("real/"):], instances.load, {"name": name}) for name in REAL_MODELS),
        ("heft", "peft", "auto", "exact", "split", BOUND), time_limit=60.0,
        description="real architectures traced op by op (docs/real-models.md): Inception-v3, ResNet-50, BERT-base "
                    "and GNMT inference at layer and operator granularity and a ResNet-50 training step, on "
                    "memory-tight systems (small accelerators, CPU cores that hold the rest, transfers through "
                    "host memory at 2 GiB/s); the 19k- and 35k-op GPT training steps on cpu-t4-a100 and "
                    "4-gpu-server"),
    "smoke": Suite(
        "smoke", tuple(Case(f"er10-seed{s}", random_wired, {"n": 10, "seed": s}) for s in range(2)),
        ("met", "heft", "sa", "exact", "split", BOUND), time_limit=2.0,
        options={"sa": {"iterations": 300}},
        description="a quick check of the runner on two single modules"),
}
