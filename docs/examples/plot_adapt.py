"""
A device removed, the schedule re-placed
========================================

A schedule is running when its fastest device fails. Instead of solving the changed
problem from scratch, mapsched starts from the placement in use: tasks on devices that
are still there stay where they are unless moving them helps, and the others are placed
afresh. This is what ``mapsched adapt PROBLEM SCHEDULE --remove DEVICE`` does.
"""

import mapsched
import mapsched.plot
from mapsched import generators

problem = generators.resnet(platform=generators.cpu_t4_a100())
before = mapsched.solve(problem, time_limit=3, seed=0)
print(f"before: {before.makespan:.3f} ms on {sorted({j.device for j in before.jobs})}")

# %%
# Take the device that runs most jobs away. The changed problem is another problem,
# with another name.

busiest = max(problem.device_names, key=lambda d: sum(j.device == d for j in before.jobs))
smaller = problem.without_devices([busiest])
print(f"removed {busiest}: {smaller.name!r}, devices {smaller.device_names}")

# %%
# Re-place from the schedule in use. The first lines of the log say how many tasks were
# placed afresh and how many the result moved.

after = mapsched.solve(smaller, time_limit=3, seed=0, initial=before)
print("\n".join(after.log.splitlines()[:2]))
print(f"after: {after.makespan:.3f} ms (bound {after.lower_bound:.3f} ms, {after.status})")
assert mapsched.validate(smaller, after) == []

# %%
# A second T4 arrives: a copy of an existing device, as ``--add t4-2=t4`` makes it.
# Re-placing again may move work onto it.

grown = smaller.with_devices({"t4-2": "t4"})
again = mapsched.solve(grown, time_limit=3, seed=0, initial=after)
print(f"{grown.name!r}: {again.makespan:.3f} ms")
print("\n".join(again.log.splitlines()[:2]))

fig = mapsched.plot.gantt(smaller, after, title=f"ResNet-18 without {busiest}")
