"""Device names of the harness, and moving values between devices.

Names are those of the problem file: ``cpu``, ``cuda:0``, ``cuda:1``... and, for
testing on a machine without a GPU, emulated CPU devices ``cpu:0``, ``cpu:1``...
that all run on the host (each gets its own worker thread in
:func:`mapsched.harness.execute`, and a copy between two of them is a real memory copy).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from mapsched.errors import HarnessError, shown

__all__ = ["EXCLUSIVE", "available", "cores", "default_threads", "host_devices", "memory_bytes", "move", "pin",
           "synchronize", "time_ms", "torch_device", "worker"]

_NAME = re.compile(r"^(cpu|cuda)(:(?:0|[1-9]\d*))?$")  # cpu:01 would be a second name of cpu:1


def torch_device(name: str) -> torch.device:
    """The torch device behind a device name (emulated ``cpu:k`` devices are the CPU)."""
    m = _NAME.match(name)
    if m is None:
        raise HarnessError(f"devices: unknown device {shown(name)}; use cpu, cpu:K (emulated) or cuda:I")
    if m.group(1) == "cpu":
        return torch.device("cpu")
    index = int(m.group(2)[1:]) if m.group(2) else 0
    if index >= torch.cuda.device_count():
        raise HarnessError(f"devices: {shown(name)} is not present here ({torch.cuda.device_count()} CUDA devices); "
                           "list the devices this machine has, e.g. --devices cpu")
    return torch.device("cuda", index)


def available() -> list[str]:
    """``cpu`` and every CUDA device present."""
    return ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def memory_bytes(name: str) -> float:
    """Memory of a device: physical RAM for the CPU, total memory for a GPU."""
    dev = torch_device(name)
    if dev.type == "cuda":
        return float(torch.cuda.get_device_properties(dev).total_memory)
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


_WORKERS: dict[tuple[str, int], ThreadPoolExecutor] = {}
_WORKERS_LOCK = threading.Lock()
EXCLUSIVE = threading.Lock()
"""Held by whatever runs jobs on the worker threads (an execution, an overhead measurement):
one at a time per process, since a job waiting for another device's job could otherwise
wait behind another caller's job there, forever."""


def worker(name: str) -> ThreadPoolExecutor:
    """The worker thread of device ``name``: one per device and intra-op thread count, for
    the life of the process.

    Every execution reuses it, as a runtime keeps its threads, instead of starting a
    fresh one with cold thread-local state (its malloc arena, the math library's
    buffers); the effect was not measured apart from the allocator's. The thread runs
    with the caller's ``torch.get_num_threads()`` (a new thread would start its own
    OpenMP team at the default size). O(1).

    Examples
    --------
    >>> worker("cpu:0") is worker("cpu:0"), worker("cpu:0") is worker("cpu:1")
    (True, False)
    """
    key = (name, torch.get_num_threads())
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _WORKERS[key] = ThreadPoolExecutor(1, f"mapsched-{name}", torch.set_num_threads, (key[1],))
        return _WORKERS[key]


def cores(names: Sequence[str], threads: int | None = None,
          allowed: Sequence[int] | None = None) -> dict[str, frozenset[int]]:
    """The cores each device's worker thread is pinned to; empty where they are left free.

    With one intra-op thread (``threads``, default ``torch.get_num_threads()``) and a
    core of ``allowed`` (default: this process's) for each CPU device, in the order of
    ``names``, each CPU device gets its own core and any other device (a GPU's thread,
    which only queues kernels) the cores left over, if any. Otherwise (more CPU devices
    than cores, or several intra-op threads, whose OpenMP team would keep the cores it
    started on) none is pinned. O(|names| + cores).

    Examples
    --------
    >>> cores(["cpu:0", "cpu:1"], 1, [0, 1])
    {'cpu:0': frozenset({0}), 'cpu:1': frozenset({1})}
    >>> cores(["cpu", "cuda:0"], 1, [0, 1, 2]), cores(["cpu:0", "cpu:1"], 1, [0])
    ({'cpu': frozenset({0}), 'cuda:0': frozenset({1, 2})}, {})
    """
    threads = torch.get_num_threads() if threads is None else threads
    if allowed is None:
        if not hasattr(os, "sched_setaffinity"):
            return {}
        allowed = sorted(os.sched_getaffinity(0))
    hosts = host_devices(names)
    if threads != 1 or len(hosts) > len(allowed):
        return {}
    out = {d: frozenset([allowed[k]]) for k, d in enumerate(hosts)}
    left = frozenset(allowed[len(hosts):])
    out.update((d, left) for d in names if d not in out and left)
    return out


def default_threads(names: Sequence[str], allowed: Sequence[int] | None = None) -> int | None:
    """Intra-op threads per device that keep several host devices off each other's cores:
    the cores of ``allowed`` (default: this process's) shared among the host CPU devices of
    ``names``, at least 1; None, PyTorch's default standing, with fewer than two of them.

    PyTorch's default, every core, on each of two emulated devices puts two OpenMP teams
    of that size on the same cores, and leaves :func:`cores` nothing to pin. O(len(names)).

    Examples
    --------
    >>> default_threads(["cpu:0", "cpu:1"], [0, 1]), default_threads(["cpu:0", "cpu:1", "cpu:2"], range(16))
    (1, 5)
    >>> default_threads(["cpu", "cuda:0"], [0, 1]) is None
    True
    """
    hosts = len(host_devices(names))
    if hosts < 2:
        return None
    if allowed is None:
        allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return max(1, len(allowed) // hosts)


def host_devices(names: Sequence[str]) -> list[str]:
    """The host CPU devices of ``names`` (``cpu`` and emulated ``cpu:K``), in order. O(|names|).

    >>> host_devices(["cpu:0", "cuda:0", "cpu:1"])
    ['cpu:0', 'cpu:1']
    """
    return [d for d in names if (m := _NAME.match(d)) is not None and m.group(1) == "cpu"]


def pin(names: Sequence[str]) -> dict[str, frozenset[int]]:
    """Pin the worker thread of each device of ``names`` to its :func:`cores`, and let
    the others run on any core of this thread's; the cores pinned.

    Two emulated devices' threads left to the scheduler share one core at times, for
    whole executions, which pinning each to its own core prevents
    (``benchmarks/bench_steady.py`` measures the difference).
    O(|names|), a round trip to each worker.
    """
    chosen = cores(names)
    if hasattr(os, "sched_setaffinity"):
        free = os.sched_getaffinity(0)  # a worker pinned by an earlier execution is let go
        for d in names:
            worker(d).submit(os.sched_setaffinity, 0, chosen.get(d, free)).result()
    return chosen


def synchronize(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def move(value: Any, src: str, dst: str) -> Any:
    """``value`` (tensors, possibly nested in tuples, lists and dicts) as seen on ``dst``.

    Between distinct emulated CPU devices tensors are cloned, so that the copy costs
    what it would between two memories.
    """
    if src == dst:
        return value
    if isinstance(value, torch.Tensor):
        target = torch_device(dst)
        if target.type == "cpu" and value.device.type == "cpu":
            return value.clone()
        # To the host the copy must be complete when this returns: a non-blocking copy to the
        # CPU hands back a tensor before its data has arrived.
        return value.to(target, non_blocking=target.type == "cuda")
    if isinstance(value, (list, tuple)):
        return type(value)(move(v, src, dst) for v in value)
    if isinstance(value, dict):
        return {k: move(v, src, dst) for k, v in value.items()}
    return value


def time_ms(fn: Callable[[], Any], devices: Sequence[torch.device], warmup: int, repeats: int) -> float:
    """Median wall time of ``fn()`` in ms, after ``warmup`` untimed calls.

    Each timed call is bracketed by a synchronisation of the CUDA devices among
    ``devices``, so that asynchronous kernels are counted in full.
    """
    for _ in range(warmup):
        fn()
    for d in devices:
        synchronize(d)
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        for d in devices:
            synchronize(d)
        times.append(1000.0 * (time.perf_counter() - t0))
    return float(np.median(times))
