"""The cost model of synthetic workloads, and the system presets it runs on.

A task has a base time ``t`` (ms for one input on the reference device). On a
device with slowdown ``k`` and batching exponent ``beta`` a batch of ``b`` inputs
takes ``t * k * j * b ** beta``, where ``j`` is a per-(task, device) lognormal
jitter (sigma 0.15) standing for op-type affinity, so no device wins every task.
``beta`` near 1 means batching barely helps (a CPU); GPUs batch well (about 0.6).
Devices with the same profile share their jitter: they are identical hardware.
See ``docs/cost-model.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mapsched.errors import shown
from mapsched.model.problem import Device, Link, Problem, System

__all__ = ["GPU_COPY_ENGINES", "DeviceProfile", "Platform", "PRESETS", "cpu_t4_a100", "gpu_server",
           "hardware_contention", "multi_node", "platform"]

GB = 1e9


@dataclass(frozen=True)
class DeviceProfile:
    """How fast a device is relative to the reference, how it batches, and its memory."""

    name: str
    slowdown: float
    batch_exponent: float
    memory: float
    node: str | None = None
    copy_engines: int | None = None


@dataclass(frozen=True)
class Platform:
    """Devices with cost parameters, and links between them."""

    name: str
    devices: tuple[DeviceProfile, ...]
    links: tuple[Link, ...]

    def system(self, batch_sizes: Sequence[int] = (1,)) -> System:
        """The :class:`System`, every device running the given batch sizes."""
        return System(tuple(Device(d.name, d.memory, tuple(batch_sizes), d.node) for d in self.devices), self.links)

    def latencies(self, base: np.ndarray, batch_sizes: Sequence[int], rng: np.random.Generator) -> list[dict]:
        """Latency tables ``{device: {batch: ms}}`` for tasks of base times ``base`` (ms)."""
        # Devices of one profile are the same hardware: they share their jitter, so
        # identical GPUs stay interchangeable (and symmetry breaking has work to do).
        kinds: dict[tuple, int] = {}
        kind = [kinds.setdefault((d.slowdown, d.batch_exponent, d.memory), len(kinds)) for d in self.devices]
        jitter = rng.lognormal(0.0, 0.15, size=(len(base), len(kinds)))
        out = []
        for i, t in enumerate(base):
            out.append({
                d.name: {int(b): float(t * d.slowdown * jitter[i, kind[k]] * b ** d.batch_exponent)
                         for b in batch_sizes}
                for k, d in enumerate(self.devices)
            })
        return out


GPU_COPY_ENGINES = 2
"""Copy engines of the presets' GPUs: a T4's and an A100's asynchronous copies run one per
direction at a time beside their kernels. The CPUs' copies are left unlimited."""


def _pcie(a: str, b: str) -> Link:
    # PCIe 4.0 x16: 32 GB/s nominal, about 25 GB/s achieved, ~10 us per transfer.
    return Link(a, b, 25 * GB, 0.01)


def cpu_t4_a100() -> Platform:
    """The seed paper's server: a Xeon CPU and T4 and A100 GPUs on one PCIe 4.0 x16 fabric,
    relative speeds 7.1x / 1.26x / 1x (its Table II, RWNN row)."""
    devs = (
        DeviceProfile("cpu", 7.1, 0.9, 64 * GB, "host0"),
        DeviceProfile("t4", 1.26, 0.6, 16 * GB, "host0", GPU_COPY_ENGINES),
        DeviceProfile("a100", 1.0, 0.55, 40 * GB, "host0", GPU_COPY_ENGINES),
    )
    return Platform("cpu-t4-a100", devs, (_pcie("cpu", "t4"), _pcie("cpu", "a100"), _pcie("t4", "a100")))


def gpu_server(gpus: int = 4, node: str = "host0", prefix: str = "") -> Platform:
    """A CPU and ``gpus`` identical A100s; GPUs joined by NVLink (300 GB/s), the CPU by PCIe."""
    cpu = DeviceProfile(f"{prefix}cpu", 7.1, 0.9, 256 * GB, node)
    gs = tuple(DeviceProfile(f"{prefix}gpu{k}", 1.0, 0.55, 40 * GB, node, GPU_COPY_ENGINES) for k in range(gpus))
    links = [_pcie(cpu.name, g.name) for g in gs]
    links += [Link(a.name, b.name, 300 * GB, 0.005) for k, a in enumerate(gs) for b in gs[k + 1:]]
    return Platform(f"{gpus}-gpu-server", (cpu, *gs), tuple(links))


def multi_node(servers: int = 6, gpus: int = 4) -> Platform:
    """``servers`` identical GPU servers; every pair of devices on different servers talks over
    a 100 Gb/s network (12.5 GB/s, 20 us), slower than the links inside a server."""
    parts = [gpu_server(gpus, f"node{s}", f"n{s}-") for s in range(servers)]
    devs = tuple(d for p in parts for d in p.devices)
    links = [ln for p in parts for ln in p.links]
    for s, p in enumerate(parts):
        for q in parts[s + 1:]:
            links += [Link(a.name, b.name, 12.5 * GB, 0.02) for a in p.devices for b in q.devices]
    return Platform(f"{servers}x{gpus}-gpu-cluster", devs, tuple(links))


PRESETS = {"cpu-t4-a100": cpu_t4_a100, "4-gpu-server": gpu_server, "multi-node": multi_node}


def hardware_contention(problem: Problem) -> Problem:
    """``problem`` on a preset's hardware with that hardware's contention: every link carries one
    transfer at a time in each direction (a PCIe link's one stream, an NVLink pair's, a
    network path's), and each GPU has :data:`GPU_COPY_ENGINES` copy engines. Refuses in one
    line a device that is no preset's."""
    from mapsched.errors import OptionError

    engines: dict[str, int | None] = {}
    for make in PRESETS.values():
        engines |= {d.name: d.copy_engines for d in make().devices}
    for d in problem.device_names:
        if d not in engines:
            raise OptionError(f"--contention: device {shown(d)} is of no system preset, so its hardware is not known; "
                              "give copy_engines=K,concurrency=C instead of hardware")
    return problem.with_contention({d: engines[d] for d in problem.device_names}, 1)


def platform(name: str) -> Platform:
    """A preset platform by name (see ``PRESETS``)."""
    from mapsched.errors import OptionError

    if name not in PRESETS:
        raise OptionError(f"--system: unknown system preset {shown(name)}; expected one of {sorted(PRESETS)}")
    return PRESETS[name]()
