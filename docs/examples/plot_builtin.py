"""
Solve the built-in instance
===========================

The ten-task graph of Topcuoglu, Hariri and Wu (2002) on three processors, solved by
the default method and drawn as a Gantt chart.
"""

import mapsched
import mapsched.plot

problem = mapsched.instances.load("topcuoglu2002")
result = mapsched.solve(problem, time_limit=5, seed=0)
print(result.method, result.makespan, result.lower_bound, result.status)
fig = mapsched.plot.gantt(problem, result)
