"""The quick bounds before and after the memory- and transfer-aware rules (issue #68), on
memory-tight DNN problems: the generators' networks on a host-staged platform (accelerators
of 0.6, 1 and 2 GiB, two CPUs that hold everything, every link 2 GiB/s) and the shipped
real-model instances. Prints a markdown table: the old quick bound (critical path, work,
load LP, interval load LP), the new ``lower_bound`` and its rule, its seconds, and the gap
of the better of ``heft`` and ``peft`` to each.

    python benchmarks/bench_memory_bounds.py
"""

from __future__ import annotations

import time

from mapsched import Link, instances, solve
from mapsched.bounds import critical_path_bound, interval_load_bound, load_bound, lower_bound, work_bound
from mapsched.generators import networks
from mapsched.generators.costs import DeviceProfile, Platform

GiB = 2**30


def tight(mems: tuple[float, ...] = (0.6, 1.0, 2.0), cpus: int = 2) -> Platform:
    """Accelerators of ``mems`` GiB and ``cpus`` CPUs of unlimited memory, all on one host."""
    devs = [DeviceProfile(f"acc{k}", 1.0, 0.55, m * GiB, "host0") for k, m in enumerate(mems)]
    devs += [DeviceProfile(f"cpu{k}", 7.1, 0.9, float("inf"), "host0") for k in range(cpus)]
    names = [d.name for d in devs]
    links = tuple(Link(a, b, 2 * GiB, 0.01) for i, a in enumerate(names) for b in names[i + 1:])
    return Platform("tight", tuple(devs), links)


def problems():
    for name, make in [("vgg16", lambda pl: networks.vgg(16, platform=pl)),
                       ("resnet18", lambda pl: networks.resnet(platform=pl)),
                       ("inception4", lambda pl: networks.inception(4, platform=pl)),
                       ("transformer2", lambda pl: networks.transformer(2, platform=pl)),
                       ("gpt3-2", lambda pl: networks.gpt3(2, platform=pl))]:
        yield f"{name}, 3 acc + 2 cpu", make(tight())
    for name in instances.names():
        if name.startswith(f"{instances.REAL}/") and name not in instances.GENERATED:
            yield name, instances.load(name)


def main() -> None:
    print("| problem | tasks | old quick bound | new bound (rule) | seconds | best list | gap old | gap new |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, p in problems():
        old = max(critical_path_bound(p), work_bound(p), load_bound(p), interval_load_bound(p))
        t0 = time.perf_counter()
        b = lower_bound(p)
        dt = time.perf_counter() - t0
        best = min(solve(p, "heft").makespan, solve(p, "peft").makespan)
        print(f"| {name} | {p.n} | {old:.4g} | {b.value:.4g} ({b.rule}) | {dt:.2f} | {best:.4g} | "
              f"{100 * (best - old) / best:.1f}% | {100 * (best - b.value) / best:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
