"""
Solve the built-in instance
===========================

The ten-task graph of Topcuoglu, Hariri and Wu (2002) on three processors ships with
mapsched. The default method (``auto``) solves it exactly and proves the answer
optimal; :func:`mapsched.plot.gantt` draws the schedule, one row per device, with the
makespan and the lower bound as vertical lines.
"""

import mapsched
import mapsched.plot

problem = mapsched.instances.load("topcuoglu2002")
print(problem.name, "-", problem.n, "tasks on", ", ".join(problem.device_names))

# %%
# Solve with the default method and a time limit (seconds). Every result carries a
# proved lower bound, and ``status`` is ``optimal`` only when the gap is closed.

result = mapsched.solve(problem, time_limit=5, seed=0)
print(f"{result.method}: makespan {result.makespan:g}, bound {result.lower_bound:g}, {result.status}")
assert mapsched.validate(problem, result) == []  # every rule of the file format holds

# %%
# A list heuristic for comparison: HEFT's makespan, and where each task runs.

heft = mapsched.solve(problem, "heft")
print(f"heft: makespan {heft.makespan:g} ({heft.makespan / result.makespan - 1:+.1%} over the optimum)")
print({task: list(devices) for task, devices in heft.mapping().items()})

# %%
# The Gantt chart of the optimal schedule. ``gantt(problem, result, "gantt.png")``
# would also write it to a file.

fig = mapsched.plot.gantt(problem, result, title="topcuoglu2002, default method")
