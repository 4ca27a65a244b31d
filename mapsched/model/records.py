"""The records a problem is made of: devices, links, tasks, edges, the objective, the
system and a harness's calibration, and the ranges every number of a problem file must
lie in.

The records hold what a caller gives, unchecked: :class:`~mapsched.model.problem.Problem`
checks them once, as it is built, and keeps checked copies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BANDWIDTH", "COMPILE", "MAX_BATCH", "MAX_BYTES", "MAX_DEVICES", "MAX_LANES", "MAX_MS", "MAX_SCALE",
           "MEMORY_SLACK", "Calibration", "Device", "Edge", "Link", "Objective", "System", "Task"]


@dataclass(frozen=True)
class Device:
    """A processor: its memory in bytes, the batch sizes it runs, the server it sits in, and
    how many copies it runs at once (``copy_engines``: None, unlimited; 0, its copies occupy
    the device itself, as its jobs do; k, at most k copies at once, beside its jobs)."""

    name: str
    memory: float = math.inf
    batch_sizes: tuple[int, ...] = (1,)
    node: str | None = None
    copy_engines: int | None = None


@dataclass(frozen=True)
class Link:
    """A link between two devices; undirected unless ``directed``. ``concurrency`` is how many
    transfers it carries at once (None: any number), each at the full bandwidth; ``duplex``
    whether an undirected link carries that many each way (True) or in both together."""

    a: str
    b: str
    bandwidth: float
    latency: float = 0.0
    directed: bool = False
    concurrency: int | None = None
    duplex: bool = True


@dataclass(frozen=True)
class Task:
    """An operation of the graph.

    ``latency`` maps a device name either to a number (the time of a batch of 1)
    or to a mapping from batch size to time. A device absent from it cannot run
    the task.
    """

    name: str
    latency: Mapping[str, Any]
    weight_bytes: float = 0.0
    input_bytes: float = 0.0
    output_bytes: float = 0.0


@dataclass(frozen=True)
class Edge:
    """A data dependency; ``bytes`` defaults to the source task's ``output_bytes``."""

    src: str
    dst: str
    bytes: float | None = None


@dataclass(frozen=True)
class Objective:
    """``latency`` (one input) or ``throughput`` over a batch of ``batch`` inputs."""

    kind: str = "latency"
    batch: int = 1

    @property
    def inputs(self) -> int:
        """Number of inputs L that a schedule processes (1 for latency)."""
        return 1 if self.kind == "latency" else self.batch


@dataclass(frozen=True)
class System:
    """The hardware: devices and the links between them."""

    devices: tuple[Device, ...]
    links: tuple[Link, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Calibration:
    """What a measurement harness folded into a problem's times beyond the kernels.

    Every latency of a task on device ``u`` is ``scale × kernel time + overhead[u]``,
    and the latency of a link from ``a`` to ``b`` is its copy latency plus
    ``sync[(a, b)]``: the terms are already in the times, and are recorded so that
    they can be seen, re-fitted (``mapsched calibrate``) and taken out again. The
    thread settings are those the times were measured under; ``mapsched run``
    refuses other ones.

    Attributes
    ----------
    threads, interop_threads : int or None
        ``torch.get_num_threads()`` and ``torch.get_num_interop_threads()`` when measured.
    overhead : mapping of str to float
        Per device, ms per job beyond its kernels (dispatch, thread hand-off, launch).
    sync : mapping of (str, str) to float
        Per directed device pair, ms per cross-device dependency beyond the copy (the
        consumer's wake-up or stream wait).
    scale : float
        Factor on the kernel times (1 unless fitted: devices that slow each other down).
    fitted : bool
        Whether the terms were fitted to measured runs rather than measured directly.
    compile : str or None
        How the harness ran each task when measured (one of :data:`COMPILE`); None
        where not recorded, which means ``none``. ``mapsched run`` refuses another.
    """

    threads: int | None = None
    interop_threads: int | None = None
    overhead: Mapping[str, float] = field(default_factory=dict)
    sync: Mapping[tuple[str, str], float] = field(default_factory=dict)
    scale: float = 1.0
    fitted: bool = False
    compile: str | None = None

    def kernel(self, latency: float, device: str) -> float:
        """The kernel time inside ``latency`` of a job on ``device``: the terms taken out."""
        return max(0.0, (latency - self.overhead.get(device, 0.0)) / self.scale)

    def copy(self, latency: float, a: str, b: str) -> float:
        """The copy latency inside a link's ``latency`` from ``a`` to ``b``: the sync taken out."""
        return max(0.0, latency - self.sync.get((a, b), 0.0))

    def summary(self) -> str:
        """One line: the terms in the times, and the thread settings.

        >>> Calibration(1, None, {"cpu:0": 0.003, "cpu:1": 0.004}, {("cpu:0", "cpu:1"): 0.04}).summary()
        'in the times: 0.003-0.004 ms per job, 0.04 ms per cross-device dependency; torch threads 1 intra-op'
        """
        def span(values: Iterable[float]) -> str:
            v = sorted(values)
            return "0" if not v else f"{v[0]:.3g}" if v[0] == v[-1] else f"{v[0]:.3g}-{v[-1]:.3g}"

        scale = f", kernels x{self.scale:.3g}" if self.scale != 1.0 else ""
        how = "fitted" if self.fitted else "in the times"
        threads = "" if self.threads is None else f"; torch threads {self.threads} intra-op"
        if self.interop_threads is not None:
            threads += f"{',' if threads else '; torch threads'} {self.interop_threads} inter-op"
        lean = "" if self.compile in (None, "none") else f"; tasks compiled {self.compile}"
        return (f"{how}: {span(self.overhead.values())} ms per job, {span(self.sync.values())} ms per cross-device "
                f"dependency{scale}{threads}{lean}")


MAX_MS = 1e12
"""Largest time a file may give, in ms (about 31 years): every method then computes in range."""
MAX_BYTES = 1e18
"""Largest size (memory, weights, activations, edge bytes), in bytes: an exabyte."""
BANDWIDTH = (1.0, 1e18)
"""Least and largest link bandwidth, in bytes per second."""
MAX_BATCH = 100_000
"""Largest number of inputs (``objective.batch``) and batch size: throughput methods index by them."""
MEMORY_SLACK = 1e-9
"""What a device may hold past its memory, relative to it: sums of float sizes round
(FORMAT.md rule 6). Every check that something fits, and every bound, uses the same
allowance (:attr:`Problem.room`), so that no bound rules out what the validator accepts."""
MAX_DEVICES = 1024
"""Most devices a problem may have: the link tables are devices x devices, and so are a list
scheduler's per-edge transfer times: their memory grows with the square of the devices, so
a small file naming tens of thousands of devices would exhaust the machine's memory."""

COMPILE = ("none", "jit", "cuda-graph")
"""How a measurement harness may run each task (``calibration.compile``): ``none``, op by op
from Python; ``jit``, a frozen TorchScript trace per task and batch size; ``cuda-graph``,
that trace captured as a CUDA graph on a GPU (``jit`` on the CPU)."""
MAX_SCALE = 1e6
"""Largest kernel-time factor a calibration may give."""
MAX_LANES = 1024
"""Largest ``concurrency`` of a link and ``copy_engines`` of a device: past it a resource is
as good as unlimited, and the timelines keep one list per unit."""
