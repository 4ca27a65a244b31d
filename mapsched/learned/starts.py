"""Where the learned methods start, without PyTorch, and what they return when a time limit
leaves no time to load it.

Loading PyTorch takes seconds, counted in a solve's time limit like every solver's loading:
``torch`` and mapsched's modules on it, then ``torch._dynamo``, which the first optimizer
loads (``doppler`` and ``placeto`` train; ``giph`` only runs its policy). A learned method started with less time
left than what it still has to load (:data:`LOADS`) returns its placement before any
learning, found here without PyTorch, rather than overrun the limit by the load:

- ``doppler``: Critical Path's assignment (its imitation teacher), best of as many randomised
  runs as the limit allows;
- ``placeto``: a random placement that fits (where its episodes start);
- ``giph``: its start placement (:func:`giph_start`).

The log says so. Once these are loaded in the process, the methods always run: a sweep or a
server that times its solves calls :func:`load` first (``mapsched bench`` does).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from mapsched.errors import InfeasibleError, OptionError, shown
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule
from mapsched.scheduling.simulate import simulate

__all__ = ["LOADS", "TRAINING", "before_loading", "check_policy_file", "fallback_ctx", "giph_start", "load",
           "load_seconds", "no_time_to_load", "random_placement", "unlearned"]

LOADS = (("torch", 2.5), ("torch._dynamo", 2.0))
"""Seconds that loading each may take, at most (on the slowest 2-core machines it was
measured on, with a margin): PyTorch with mapsched's modules on it, then what a first
optimizer loads."""
TRAINING = ("doppler", "placeto")
"""The learned methods that train in a solve, and so load what an optimizer loads."""


def load() -> None:
    """Load what the learned methods load before they run (:data:`LOADS`), so that no time limit
    afterwards in this process pays for it. Needs PyTorch."""
    from importlib import import_module

    for name in ("mapsched.learned.doppler", "mapsched.learned.placeto", "mapsched.learned.giph", "torch._dynamo"):
        import_module(name)


def load_seconds(train: bool) -> float:
    """Seconds still to load before a learned method runs (``train``: one that trains)."""
    return sum(seconds for name, seconds in LOADS[:2 if train else 1] if name not in sys.modules)


def no_time_to_load(ctx: Any, train: bool) -> bool:
    """Whether ``ctx``'s time limit leaves less than what is still to load (:func:`load_seconds`),
    PyTorch being installed (else the method says how to install it)."""
    from importlib.util import find_spec

    need = load_seconds(train) if ctx.time_limit is not None else 0.0
    return need > 0 and ctx.remaining() < need and find_spec("torch") is not None


SHIPPED_GIPH = {"mixture": "giph-mixture.pt", "multi-diff": "giph-multi-diff.pt"}
"""The policies shipped for ``giph``, by the name ``--policy`` takes: the default, trained on
a mixture of problem families, and the earlier one, trained on GiPH's ``multi-diff`` set."""


SHIPPED_DOPPLER = {m: f"doppler-{m}.pt" for m in (2, 4, 8)}
"""The policies shipped for ``doppler`` (``--policy shipped``), by device count: trained across
problem families (:class:`mapsched.learned.doppler.FamilyTrainer`)."""


def shipped_file(name: str) -> str:
    """The path of a shipped policy file (:data:`SHIPPED_GIPH`, :data:`SHIPPED_DOPPLER`)."""
    from importlib import resources

    return str(resources.files("mapsched.learned") / "data" / SHIPPED_GIPH.get(name, name))


def shipped_doppler(devices: int) -> str:
    """The shipped ``doppler`` policy for ``devices`` devices; refused in one line where none is shipped."""
    if devices not in SHIPPED_DOPPLER:
        counts = ", ".join(map(str, sorted(SHIPPED_DOPPLER)))
        raise OptionError(f"--policy: no doppler policy is shipped for {devices} devices (only for {counts}); train "
                          f"one with 'mapsched train doppler --families ... --devices {devices}'")
    return shipped_file(SHIPPED_DOPPLER[devices])


def check_policy_file(path: str, method: str, flag: str = "--policy") -> None:
    """Refuse in one line a policy file that is not there: what can be checked of it without
    PyTorch, so that a solve that returns before loading it still refuses a typo."""
    if method == "giph" and path in SHIPPED_GIPH:
        return
    if path and not os.path.isfile(path):
        raise OptionError(f"{flag}: no file {shown(path)}; train one with 'mapsched train {method}'")


def random_placement(p: Problem, rng: np.random.Generator) -> np.ndarray:
    """A random placement that fits memory and links (GiPH starts from a random one), or the
    feasibility repair's when 100 draws do not. O(draws (n m + E) log n).

    >>> import numpy as np, mapsched
    >>> p = mapsched.instances.load("topcuoglu2002")
    >>> random_placement(p, np.random.default_rng(0)).shape
    (10,)
    """
    from mapsched.heuristics.random_search import random_owner
    from mapsched.scheduling.construct import repaired_owner

    for _ in range(100):
        owner = random_owner(p, rng)[:, 0]
        try:
            simulate(p, owner)
            return owner
        except InfeasibleError:
            continue
    return repaired_owner(p)


def giph_start(p: Problem, ctx: Any, start: str) -> tuple[np.ndarray, str, Schedule | None]:
    """GiPH's start placement as a device index per task, its name for the log, and the
    start's own schedule where it has one: the solve's initial placement if it has one, else
    the better of ``heft``'s and ``peft``'s (``start="best-list"``), ``heft``'s
    (``start="heft"``) or a random one (GiPH's protocol)."""
    from mapsched.scheduling.decoder import as_owner

    if ctx.initial is not None:
        return as_owner(p, ctx.initial.mapping())[:, 0], "the initial", ctx.initial
    if start in ("heft", "best-list"):
        from mapsched.engine.registry import get

        found = []
        for name in ("heft",) if start == "heft" else ("heft", "peft"):
            m = get(name)
            found.append((m.fn(p, ctx, **m.parse_options({})), name))
        best, name = min(found, key=lambda sn: sn[0].makespan)  # the first of equals
        return as_owner(p, best.mapping())[:, 0], f"{name}'s", best
    return random_placement(p, ctx.rng), "a random", None


def before_loading(p: Problem, ctx: Any, method: str, policy: str, start: str = "best-list") -> Schedule | None:
    """What a learned method does before it loads PyTorch: refuse a missing ``policy`` file,
    then return its placement before learning (:func:`unlearned`) where the time limit
    leaves no time to load; None where it goes on to load and run."""
    check_policy_file(policy, method)
    return unlearned(p, ctx, method, start) if no_time_to_load(ctx, method in TRAINING) else None


def unlearned(p: Problem, ctx: Any, method: str, start: str = "best-list") -> Schedule:
    """``method``'s placement before any learning, found without PyTorch (see the module
    docstring), with a log line saying why."""
    if method == "doppler":
        from mapsched.heuristics.critical_path import critical_path

        s, what = critical_path(p, ctx, runs=50), "Critical Path's assignment (its imitation teacher)"
    elif method == "giph":
        owner, origin, own = giph_start(p, ctx, start)
        s = own if own is not None else simulate(p, owner, method=method)
        what = f"{origin} placement it starts from"
    else:
        s, what = simulate(p, random_placement(p, ctx.rng), method=method), "a random placement"
    need = load_seconds(method in TRAINING)
    s.log += (f"{method}: the time limit left less than the {need:g} s that loading PyTorch may take; "
              f"{what}, with no learning\n")
    return s


def fallback_ctx(ctx: Any) -> Any:
    """``ctx`` with a generator of its own, so that a fallback found first does not change the
    draws of what follows it."""
    return replace(ctx, rng=np.random.default_rng(0))
