"""REINFORCE with a baseline, and policy checkpoints, for mapsched's learned methods.

The pieces DOPPLER's Stages I and II share with later learned methods (Placeto, GiPH):
the losses on a batch of recorded steps, the reward baseline, the exploration schedule,
one-thread torch for small-op training, and checkpoint files.

A checkpoint is a ``torch.save`` of plain data (CPU tensors, numbers, strings), read back
with ``weights_only=True`` so that loading one runs no code::

    {"format": "mapsched.policy", "version": 1, "method": "doppler",
     "config": {...hyper-parameters...}, "devices": m,
     "policy": {network name: state dict},   # the best by greedy evaluation
     "resume": {...},                         # the last state, optimisers and rng, for --resume
     ...}
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import math
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from mapsched.engine import interrupt
from mapsched.errors import OptionError, first_line, shown
from mapsched.learned.starts import check_policy_file
from mapsched.model.files import write_file

__all__ = ["FORMAT", "VERSION", "Baseline", "Diverged", "ProblemTrainer", "discounted_returns", "diverged_note",
           "entropy_term", "epsilon", "file_config", "imitation_loss", "load_checkpoint", "one_thread", "pick",
           "policy_gradient_loss", "reading", "save_checkpoint", "seeded", "snapshot", "step_returns", "train_here"]

FORMAT = "mapsched.policy"
VERSION = 1
T = TypeVar("T")
MAX_COUNT = 10**6
"""The largest count (network width, rounds, samples, episodes between evaluations) a
policy file's config may hold."""


@contextlib.contextmanager
def reading(flag: str, what: str = "the policy file is damaged") -> Iterator[None]:
    """Turn the errors of reading a checkpoint's contents (missing keys, wrong shapes) into
    one line naming ``flag``; an :class:`OptionError` raised inside passes as it is."""
    try:
        yield
    except OptionError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise OptionError(f"{flag}: {what} ({first_line(exc)}); train it again") from None


def file_config(cls: type, values: Any, **fixed: Any) -> Any:
    """``cls(**values, **fixed)``, the config dataclass of a policy file (``fixed``: fields the
    file keeps elsewhere), each value checked against
    its field's default: a string, tuple or flag of that type; a count a whole number from 1
    (from 0 where the default is 0) to :data:`MAX_COUNT`; a rate, factor or temperature a finite
    number from 0 (at most 1 for ``gamma`` and the ``eps`` rates). A ``ValueError`` naming the
    field otherwise, which :func:`reading` turns into one line: a value out of range failed
    deep in training or solving (``eval_every`` 0 divided by zero)."""
    if not isinstance(values, dict):
        raise ValueError(f"config: expected a mapping of settings, got {type(values).__name__}")
    cfg = cls(**{**values, **fixed})
    for f in dataclasses.fields(cfg):
        v, default = getattr(cfg, f.name), f.default
        if isinstance(default, (bool, str, tuple)):
            ok = type(v) is type(default)
        elif isinstance(default, int):
            ok = type(v) is int and (0 if default == 0 else 1) <= v <= MAX_COUNT
        else:
            most = 1.0 if f.name == "gamma" or "eps" in f.name else math.inf
            ok = type(v) in (int, float) and math.isfinite(v) and 0 <= v <= most
        if not ok:
            raise ValueError(f"config {f.name}: {shown(v)} is out of range")
    return cfg


class Cut(Exception):
    """A rollout reached its trainer's :attr:`ProblemTrainer.until`: a solve's deadline, or ``mapsched train``'s."""


class Diverged(ArithmeticError):
    """A policy's action probabilities (or scores) are not finite, its weights grown past
    float32's range by training at too high a rate: no action can be drawn from it."""


def pick(prob: np.ndarray, rng: np.random.Generator, greedy: bool = False) -> int:
    """An action drawn from the probabilities ``prob`` (normalised here), or with ``greedy``
    the index of the largest; :class:`Diverged` where one is not finite. O(len(prob)).

    >>> pick(np.array([0.2, 0.8]), np.random.default_rng(0), greedy=True)
    1
    """
    if not np.isfinite(prob).all():
        raise Diverged("the policy's action probabilities are not finite")
    return int(np.argmax(prob)) if greedy else int(rng.choice(len(prob), p=prob / prob.sum()))


class ProblemTrainer(ABC):
    """What the learners trained on one problem (``doppler``, ``placeto``) share: training
    stage by stage within a deadline, and the results a checkpoint keeps.

    A subclass sets ``p`` (the problem) and ``cfg`` (with ``eval_every``), calls
    :meth:`_reset` in its constructor, and defines ``episode(stage, index, episodes)`` and
    ``evaluate()`` (which update ``best_makespan``, ``best_assignment``, ``eval_makespan``
    and ``best_policy``)."""

    p: Any
    cfg: Any

    def _reset(self, stages: tuple[str, ...]) -> None:
        self.done = dict.fromkeys(stages, 0)
        self.best_makespan, self.best_assignment = math.inf, None
        self.eval_makespan, self.best_policy = math.inf, None
        self.rollouts = 0
        self.seconds = 0.0  # the last episode's duration: none is started that would end past the deadline
        self.until = math.inf  # solve's deadline (perf_counter): see check_until
        self.diverged = False  # train_here stopped training at a policy gone past float32
        self.cut = False  # train_here's time limit (or a stop) ended training before its episodes

    @abstractmethod
    def episode(self, stage: str, index: int, episodes: int) -> float:
        """Train one episode of ``stage``; returns its makespan."""

    @abstractmethod
    def evaluate(self) -> float:
        """Evaluate the current policy (keeping it if best); returns its makespan."""

    def check_until(self) -> None:
        """Raise :class:`Cut` past :attr:`until`, or once a stop is requested (Ctrl-C, within
        :func:`mapsched.engine.interrupt.graceful`): rollouts whose steps are slow call it at each
        step (one of a few thousand tasks takes seconds), and :func:`train_here` stops there,
        with nothing updated by the rollout cut off but the best placement it reached."""
        if time.perf_counter() >= self.until or interrupt.requested():
            raise Cut

    def first_episode_seconds(self, stage: str) -> float:
        """How long the first episode of ``stage`` may take, from :attr:`seconds` (the last episode's
        or evaluation's duration): a subclass whose stages differ in cost scales it."""
        return self.seconds

    def run(self, stages: tuple[str, ...], episodes: int, deadline: float = math.inf,
            progress: Callable[[str, int, float], None] | None = None,
            checkpoint: Callable[[], None] | None = None, checkpoint_every: int = 0,
            stop: Callable[[], bool] = lambda: False) -> None:
        """Train ``episodes`` episodes of each stage in order (continuing from :attr:`done`), until
        ``deadline`` (``time.perf_counter()``) or ``stop()``: each stage left gets an equal share of
        the time left. Evaluates every ``eval_every`` episodes and at each stage's end; calls
        ``progress(stage, episodes done, best makespan)`` after each episode and
        ``checkpoint()`` every ``checkpoint_every`` episodes."""
        for k, stage in enumerate(stages):
            now = time.perf_counter()
            if now >= deadline or stop():
                return
            stage_deadline = now + (deadline - now) / (len(stages) - k)
            self.seconds = self.first_episode_seconds(stage)
            while self.done[stage] < episodes and time.perf_counter() + self.seconds < stage_deadline and not stop():
                i = self.done[stage]
                started = time.perf_counter()
                self.episode(stage, i, episodes)
                self.seconds = time.perf_counter() - started
                if (i + 1) % self.cfg.eval_every == 0 or i + 1 == episodes:
                    self.evaluate()
                if progress is not None:
                    progress(stage, i + 1, self.best_makespan)
                if checkpoint is not None and checkpoint_every and (i + 1) % checkpoint_every == 0:
                    checkpoint()
            if self.done[stage] < episodes and time.perf_counter() + self.seconds < deadline and not stop():
                self.evaluate()  # the stage's share is spent, not the time limit: keep what it learnt

    def results(self) -> dict[str, Any]:
        """The checkpoint's entries besides the policies and the resume state."""
        return {"eval_makespan": self.eval_makespan, "best_makespan": self.best_makespan,
                "best_assignment": self.best_assignment,
                "problem": {"tasks": self.p.n, "edges": self.p.E, "digest": self.digest}}

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the problem's JSON: the best assignment a checkpoint keeps is one of
        that problem only (another of the same size may not even fit it in memory)."""
        return hashlib.sha256(self.p.to_json(None).encode()).hexdigest()

    def restore(self, data: dict[str, Any], state: dict[str, Any]) -> None:
        """Resume a checkpoint's counters and results; refuses, in one line, a checkpoint of
        another problem (files from before the digest: of another size)."""
        was = data["problem"] if isinstance(data["problem"], dict) else {}
        if (was.get("tasks"), was.get("edges")) != (self.p.n, self.p.E):
            raise OptionError(f"--resume: the checkpoint was trained on a problem of {was.get('tasks')} tasks "
                              f"and {was.get('edges')} edges, not this one; resume on the same problem, or "
                              "start a new file")
        if was.get("digest", self.digest) != self.digest:
            raise OptionError("--resume: the checkpoint was trained on another problem of the same size (its "
                              "times, sizes or devices differ); resume on the same problem, or start a new file")
        self.done.update(state["done"])
        self.rollouts = state["rollouts"]
        self.best_policy = data["policy"]
        self.eval_makespan = data["eval_makespan"]
        self.best_makespan = data["best_makespan"]
        self.best_assignment = data["best_assignment"]


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s weights that later training steps leave alone."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def train_here(trainer_class: Any, problem: Any, ctx: Any, method: str, policy: str, episodes: int | None,
               stages: tuple[str, ...], config: Any, default_episodes: int) -> Any:
    """A per-problem learner's run inside ``solve``: load ``policy`` (or start from
    ``config``), evaluate it, then train ``episodes`` per stage (by default
    ``default_episodes`` without a policy, none with one) within the time limit, reporting
    every better makespan to ``ctx``. ``trainer_class`` is the method's ``Trainer``
    (``from_checkpoint``, ``evaluate``, ``run``, ``best_makespan``)."""
    deadline = time.perf_counter() + ctx.remaining()
    seed = int(ctx.rng.integers(2**31 - 1))
    with one_thread():
        if policy:
            data = load_checkpoint(policy, method, problem.m)
            kept = data["config"] if isinstance(data["config"], dict) else {}
            for field in dataclasses.fields(config):  # a width given beside a policy would be ignored
                value = getattr(config, field.name)
                if value != field.default and field.name in kept and value != kept[field.name]:
                    raise OptionError(f"--{field.name}: {policy} keeps {field.name} {shown(kept[field.name])}, which "
                                      f"sets a new policy only; leave --{field.name} out with --policy")
            trainer = trainer_class.from_checkpoint(problem, data, seed)
        else:
            trainer = trainer_class(problem, config, seed)
        trainer.until = deadline
        count = episodes if episodes is not None else (0 if policy else default_episodes)

        def progress(stage: str, done: int, best: float) -> None:
            if best < math.inf:
                ctx.improved(best)

        try:
            if time.perf_counter() < deadline:
                trainer.evaluate()
                if trainer.best_makespan < math.inf:
                    ctx.improved(trainer.best_makespan)
            trainer.run(stages, count, deadline, progress, stop=lambda: ctx.remaining() <= 0)
        except Cut:  # the deadline, mid-rollout: that rollout left only its best placement
            pass
        except Diverged:
            if policy and not sum(trainer.done.values()):
                raise OptionError(f"--policy: {policy} gives no finite action probabilities on this problem; "
                                  "train it again") from None
            trainer.diverged = True  # training went past float32: the best placement so far stands
    trainer.cut = any(trainer.done[stage] < count for stage in stages) and not trainer.diverged
    return trainer


def diverged_note(trainer: ProblemTrainer, method: str) -> str:
    """The log line of a solve whose training :func:`train_here` stopped at a diverged policy."""
    return f"{method}: training stopped where the policy diverged (probabilities not finite)\n" \
        if trainer.diverged else ""


_LOCK = threading.Lock()  # torch's thread setting and global generator are the process's, not a thread's
_one_thread_users = 0
_threads_before = 1


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one intra-op thread, restoring the setting once the last block that
    asked for it (in any thread) ends.

    The networks are small and the ops many, so splitting each op over threads costs
    far more in synchronisation than it saves.
    """
    global _one_thread_users, _threads_before
    with _LOCK:
        if not _one_thread_users:
            _threads_before = torch.get_num_threads()
            torch.set_num_threads(1)
        _one_thread_users += 1
    try:
        yield
    finally:
        with _LOCK:
            _one_thread_users -= 1
            if not _one_thread_users:
                torch.set_num_threads(_threads_before)


def seeded(seed: int, build: Callable[[], T]) -> T:
    """``build()`` (a policy's networks) drawn from torch's generator seeded with ``seed``,
    the generator left as it was. One thread at a time: two solves building at once in one
    process drew from each other's seed, and the same seed gave another schedule."""
    with _LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def epsilon(start: float, end: float, episode: int, episodes: int) -> float:
    """Linear exploration schedule: ``start`` at episode 0, ``end`` at the stage's last episode."""
    if episodes <= 1:
        return end
    return start + (end - start) * min(1.0, episode / (episodes - 1))


class Baseline:
    """The mean makespan of the episodes so far, current one included (as DOPPLER's code does).

    :meth:`advantage` is relative to the mean, ``(mean - makespan) / mean``, so that the
    learning rate means the same in microseconds or in seconds.
    """

    def __init__(self, total: float = 0.0, count: int = 0) -> None:
        self.total, self.count = total, count

    def advantage(self, makespan: float) -> float:
        self.total += makespan
        self.count += 1
        mean = self.total / self.count
        return (mean - makespan) / mean if mean > 0 else 0.0

    def state(self) -> dict[str, Any]:
        return {"total": self.total, "count": self.count}


def discounted_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """Per step t, ``sum_{k >= t} gamma ** (k - t) * rewards[k]``. O(len(rewards))."""
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def step_returns(steps: int, advantage: float, gamma: float) -> torch.Tensor:
    """Returns of an episode whose only reward, ``advantage``, comes at its last step:
    ``gamma ** (steps - 1 - t) * advantage`` for step t."""
    exponent = torch.arange(steps - 1, -1, -1, dtype=torch.float64)
    return (advantage * gamma ** exponent).to(torch.float32)


def policy_gradient_loss(log_probs: torch.Tensor, taken: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """REINFORCE: ``-sum_t log pi(a_t | s_t) R_t``; ``log_probs`` (T, A), ``taken`` (T,) action indices."""
    return -(log_probs.gather(1, taken.unsqueeze(1)).squeeze(1) * returns).sum()


def imitation_loss(log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``-sum_t sum_{a in teacher's ties} log pi(a | s_t)`` (DOPPLER Eq. 2); ``targets`` a (T, A) bool mask,
    or weights (``-sum_t sum_a w_a log pi(a | s_t)``, whose minimum is ``pi`` proportional to ``w``)."""
    if targets.dtype == torch.bool:
        return -log_probs.masked_fill(~targets, 0.0).sum()
    return -(log_probs * targets).sum()


def entropy_term(log_probs: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``sum_t sum_a p log p`` over the valid actions: adding it with a positive weight raises entropy."""
    p = log_probs.exp()
    return (p * log_probs).masked_fill(~valid, 0.0).sum()


def save_checkpoint(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` (plain data and tensors), tagged with the format and version, to ``path``
    in one piece (:func:`mapsched.model.files.write_file`: no half-written file on failure)."""
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, **data}, buf)
    write_file(path, buf.getvalue())


def load_checkpoint(path: str, method: str, devices: int | None, flag: str = "--policy") -> dict[str, Any]:
    """Read a checkpoint of ``method``, refusing in one line (an :class:`OptionError` naming
    ``flag``) a missing or corrupt file, another format or method, or a policy trained for
    another number of devices than ``devices`` (None: any)."""
    check_policy_file(path, method, flag)
    try:
        with warnings.catch_warnings():  # torch warns, in two lines, before failing on a plain pickle
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds of error on a damaged file
        reason = "unreadable" if isinstance(exc, OSError) else "damaged, or not written by mapsched"
        raise OptionError(f"{flag}: {shown(path)} is not a readable policy file ({reason}); train one with "
                          f"'mapsched train {method}'") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise OptionError(f"{flag}: {shown(path)} is not a mapsched policy file; train one with 'mapsched train "
                          f"{method}'")
    if data.get("version") != VERSION:
        raise OptionError(f"{flag}: {shown(path)} is policy format version {shown(data.get('version'))}; this mapsched "
                          f"reads version {VERSION}: train it again")
    if data.get("method") != method:
        raise OptionError(f"{flag}: {shown(path)} is a policy of method {shown(data.get('method'))}, not "
                          f"{shown(method)}")
    for key in ("config", "devices", "policy"):
        if key not in data:
            raise OptionError(f"{flag}: {shown(path)} is damaged (no {shown(key)}); train it again")
    if type(data["devices"]) is not int or data["devices"] < 0:  # 0: any number (giph)
        raise OptionError(f"{flag}: {shown(path)} is damaged (devices {shown(data['devices'])}); train it again")
    if devices is not None and data["devices"] != devices:
        raise OptionError(f"{flag}: {shown(path)} was trained for {data['devices']} devices and this problem has "
                          f"{devices}; train a policy for {devices} devices")
    return data
