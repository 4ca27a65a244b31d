"""Whether the devices' copies take turns: copies timed alone and side by side.

For each pair of devices, a copy of ``size`` bytes is timed alone, two of them at once in
the same direction, and two at once in opposite directions, each from its own thread (on a
GPU, on its own stream); and for each device, a copy into it alone, a job on it alone (a
matrix product sized to last about as long), and both at once. Two copies that together
take :data:`TURNS` times one copy's time or more take turns: the link carries one at a time
(``concurrency`` 1), and in both directions together where the opposite copies take turns
too (``duplex`` false). A copy and a job that together take at least :data:`TURNS` times the
longer of the two share the device (``copy_engines`` 0). What overlaps is left unlimited:
two streams cannot tell one copy engine per direction from many, and on emulated CPU devices
(``cpu:K``, one machine's cores) the figures are those of the machine's memory system.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mapsched.harness.devices import move, synchronize, torch_device
from mapsched.model.problem import Problem

__all__ = ["TURNS", "Contention", "measure_contention"]

TURNS = 1.5
"""Two operations at once that take this many times the longer one alone, or more, take turns:
1 where they overlap fully, 2 where they run one after the other."""


@dataclass
class Contention:
    """What :func:`measure_contention` found: per device pair ``(a, b)`` (one of each pair) the
    link's ``concurrency`` (1, or None: unlimited) and ``duplex``; per device its
    ``copy_engines`` (0, or None: unlimited); and the ratios they rest on."""

    concurrency: dict[tuple[str, str], int | None] = field(default_factory=dict)
    duplex: dict[tuple[str, str], bool] = field(default_factory=dict)
    copy_engines: dict[str, int | None] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)

    def apply(self, problem: Problem) -> Problem:
        """``problem`` with these fields (:meth:`~mapsched.model.edits.Edits.with_contention`); a
        link is named as ``(a, b)`` either way round."""
        lanes = {**self.concurrency, **{(b, a): c for (a, b), c in self.concurrency.items()}}
        duplex = all(self.duplex.get(pair, True) for pair in self.concurrency if self.concurrency[pair] is not None)
        return problem.with_contention(self.copy_engines, lanes, duplex)


def _together(fns: Sequence[Callable[[], Any]], devices: Sequence[torch.device], warmup: int, repeats: int) -> float:
    """Median wall time (ms) of running ``fns`` at once, each from its own thread (on a CUDA
    device, on its own stream), until every one and every device is done."""
    streams = [torch.cuda.Stream(d) if d.type == "cuda" else None for d in devices]

    def run(k: int) -> None:
        if streams[k] is None:
            fns[k]()
        else:
            with torch.cuda.stream(streams[k]):
                fns[k]()

    times = []
    for rep in range(warmup + max(1, repeats)):
        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(fns))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for d in set(devices):
            synchronize(d)
        if rep >= warmup:
            times.append(1000.0 * (time.perf_counter() - t0))
    return float(np.median(times))


def _product(n: int, device: torch.device) -> Callable[[], Any]:
    """A job on ``device``: the product of two n-by-n matrices."""
    a = torch.ones(n, n, device=device)
    return lambda: a @ a


def measure_contention(devices: Sequence[str], size: int = 2**24, warmup: int = 2, repeats: int = 5) -> Contention:
    """Time copies of ``size`` bytes alone and side by side (module docstring) and say which
    links and devices take turns.

    >>> c = measure_contention(["cpu:0", "cpu:1"], size=2**16, warmup=0, repeats=1)
    >>> sorted(c.copy_engines), list(c.concurrency)
    (['cpu:0', 'cpu:1'], [('cpu:0', 'cpu:1')])
    """
    out = Contention()
    tdev = {d: torch_device(d) for d in devices}
    data = {d: torch.empty(size, dtype=torch.uint8, device=tdev[d]) for d in devices}

    def copy(a: str, b: str) -> Callable[[], Any]:
        return lambda: move(data[a], a, b)

    with torch.inference_mode():
        for k, a in enumerate(devices):
            for b in devices[k + 1:]:
                pair = [tdev[a], tdev[b]]
                alone = _together([copy(a, b)], [tdev[a]], warmup, repeats)
                same = _together([copy(a, b), copy(a, b)], [tdev[a], tdev[a]], warmup, repeats)
                both = _together([copy(a, b), copy(b, a)], pair, warmup, repeats)
                out.ratios[f"{a} -> {b} x2"] = same / alone
                out.ratios[f"{a} <-> {b}"] = both / alone
                out.concurrency[(a, b)] = 1 if same >= TURNS * alone else None
                out.duplex[(a, b)] = both < TURNS * alone
        for d in devices:
            src = next((s for s in devices if s != d), None)
            if src is None:  # one device: no copy into it to time
                out.copy_engines[d] = None
                continue
            copy_ms = _together([copy(src, d)], [tdev[d]], warmup, repeats)
            n = 64
            job = _product(n, tdev[d])
            job_ms = _together([job], [tdev[d]], warmup, repeats)
            while job_ms < copy_ms and n < 4096:  # a job about as long as the copy
                n *= 2
                job = _product(n, tdev[d])
                job_ms = _together([job], [tdev[d]], warmup, repeats)
            both = _together([job, copy(src, d)], [tdev[d], tdev[d]], warmup, repeats)
            out.ratios[f"{d}: job and copy"] = both / max(job_ms, copy_ms)
            out.copy_engines[d] = 0 if both >= TURNS * max(job_ms, copy_ms) else None
    return out
