"""Learned methods: policies trained by imitation and reinforcement learning (need PyTorch).

This module registers the methods and imports nothing heavy, so that ``import mapsched``
and ``mapsched methods`` work without PyTorch; the torch modules (:mod:`.mpnn`,
:mod:`.reinforce`, :mod:`.doppler`, :mod:`.placeto`, :mod:`.giph`) load when a method runs,
and without PyTorch the method stops with one line saying ``pip install 'mapsched[torch]'``.
Under a time limit too short to load PyTorch, they return their placement before any
learning instead (:mod:`.starts`); :func:`load` loads it beforehand.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from mapsched.engine.registry import Option, register
from mapsched.errors import OptionError, shown
from mapsched.learned.starts import before_loading, load, shipped_doppler
from mapsched.model.problem import Problem
from mapsched.model.schedule import Schedule

__all__ = ["MAX_EDGE_HIDDEN", "MAX_HIDDEN", "MAX_ROUNDS", "load", "torch_module"]

MAX_HIDDEN = 4096
"""Widest embedding a new policy takes (the defaults are 32-128; past this a network of
these small graphs only costs memory)."""
MAX_EDGE_HIDDEN = 256
"""Widest embedding of ``doppler``'s policy, whose edge network ends in ``hidden x hidden**2``
weights: 67 MB at 256 (and Adam's two copies), but 275 GB at 4,096."""
MAX_ROUNDS = 64
"""Most message-passing rounds a new policy takes (the defaults are 3-6)."""


def torch_module(name: str, method: str) -> ModuleType:
    """Import ``mapsched.learned.<name>``, or refuse ``method`` in one line when PyTorch is missing."""
    from importlib import import_module

    try:
        return import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != "torch" and not (exc.name or "").startswith("torch."):
            raise
        raise OptionError(f"method {shown(method)} needs PyTorch, which is not installed; "
                          "pip install 'mapsched[torch]'") from None


@register(
    "doppler",
    "DOPPLER's learned dual policy (SEL picks the next op, PLC its device): Stage I imitation of "
    "critical-path and Stage II REINFORCE under the work-conserving model, on this problem or from a "
    "trained --policy; best assignment seen, simulated (needs torch)",
    objectives=("latency",),
    requires=("torch",),
    options=(
        Option("policy", str, "", "a policy file from 'mapsched train doppler', or shipped: the policy shipped for "
                                  "this many devices, trained across problem families (default: train on this "
                                  "problem)",
               reads=True),
        Option("episodes", int, None, "episodes per stage (default: 100 without --policy, 0 with one: its "
                                      "greedy assignment only; more fine-tune it here)"),
        Option("stages", str, "il,sim", "il (imitate critical-path), sim (REINFORCE on the simulated makespan), "
                                        "or il,sim"),
        Option("hidden", int, 128, "embedding width of a new policy", positive=True, most=MAX_EDGE_HIDDEN),
        Option("rounds", int, 6, "message-passing rounds of a new policy", positive=True, most=MAX_ROUNDS),
        Option("samples", int, 128, "rollouts drawn from the trained policy (softmax at temperature 0.3) "
                                    "after training, within the time limit; the best assignment is kept"),
    ),
)
def doppler(problem: Problem, ctx: Any, policy: str, episodes: int | None, stages: str, hidden: int,
            rounds: int, samples: int) -> Schedule:
    """DOPPLER (Yao et al. 2025), Stages I and II: :func:`mapsched.learned.doppler.solve_doppler`."""
    if policy == "shipped":
        policy = shipped_doppler(problem.m)
    if (unlearned := before_loading(problem, ctx, "doppler", policy)) is not None:
        return unlearned
    return torch_module("doppler", "doppler").solve_doppler(problem, ctx, policy, episodes, stages, hidden, rounds,
                                                            samples)


@register(
    "placeto",
    "Placeto (Addanki et al. 2019), DOPPLER's learned baseline: re-places each task once per episode in "
    "topological order, the graph re-embedded at every step, REINFORCE on the simulated makespan's "
    "improvements; best placement seen, simulated (needs torch)",
    objectives=("latency",),
    requires=("torch",),
    options=(
        Option("policy", str, "", "a policy file from 'mapsched train placeto' (default: train on this problem)",
               reads=True),
        Option("episodes", int, None, "training episodes (default: 100 without --policy, 0 with one: its "
                                      "evaluated placement only; more fine-tune it here)"),
        Option("hidden", int, 32, "embedding width of a new policy", positive=True, most=MAX_HIDDEN),
        Option("rounds", int, 3, "message-passing rounds per direction of a new policy", positive=True,
               most=MAX_ROUNDS),
    ),
)
def placeto(problem: Problem, ctx: Any, policy: str, episodes: int | None, hidden: int, rounds: int) -> Schedule:
    """Placeto (Addanki et al. 2019): :func:`mapsched.learned.placeto.solve_placeto`."""
    if (unlearned := before_loading(problem, ctx, "placeto", policy)) is not None:
        return unlearned
    return torch_module("placeto", "placeto").solve_placeto(problem, ctx, policy, episodes, hidden, rounds)


@register(
    "giph",
    "GiPH's learned placement improvement (a policy over gpNet moves one task per step, |V| x ratio steps "
    "from the best list schedule's, a random or the --initial placement, each run by the work-conserving "
    "model); the best placement seen, or the start where it is better (needs torch)",
    objectives=("latency",),
    requires=("torch",),
    initial=True,
    relocation=True,
    options=(
        Option("policy", str, "", "a policy file from 'mapsched train giph', or a shipped one: mixture (the "
                                  "default, trained on a mixture of problem families) or multi-diff (trained on "
                                  "GiPH's multi-diff networks)", reads=True),
        Option("ratio", float, 2.0, "search steps per task (GiPH: 2)", positive=True, most=1e6),
        Option("noise", float, 0.0, "GiPH's noise on every run of the search (its noisy runs: 0.2); the best "
                                    "noisy run's placement is returned as the noiseless model runs it", most=1.0),
        Option("greedy", bool, False, "take the policy's most likely move instead of sampling (GiPH samples)"),
        Option("start", str, "best-list", "the start placement without --initial: the better of heft's and "
               "peft's (best-list), heft's, or random (GiPH's protocol); the result is never worse than it",
               choices=("best-list", "heft", "random")),
        Option("episodes", int, 0, "fine-tune the policy on this problem first: REINFORCE episodes, each a search "
               "from the start placement, stopping in time for the final search within the time limit (default 0)",
               most=10**6),
    ),
)
def giph(problem: Problem, ctx: Any, policy: str, ratio: float, noise: float, greedy: bool, start: str,
         episodes: int) -> Schedule:
    """GiPH (Hu et al. 2023): :func:`mapsched.learned.giph.solve_giph`."""
    if (unlearned := before_loading(problem, ctx, "giph", policy, start)) is not None:
        return unlearned
    tune = torch_module("giph_training", "giph").fine_tune if episodes else None
    return torch_module("giph", "giph").solve_giph(problem, ctx, policy, ratio, noise, greedy, start, episodes, tune)
