"""
A training step through the default method
===========================================

A whole training step of a GPT decoder, op by op (forward, loss, backward and the SGD
update), from :func:`mapsched.generators.transformer_train`: the same graph that
``mapsched trace`` records from a PyTorch model, without needing torch. It is kept small
here (one layer, about 850 ops) so that the example runs in seconds; the method is
the same on tens of thousands of ops.
"""

import mapsched
import mapsched.plot
from mapsched import generators

problem = generators.transformer_train(layers=1, d_model=512, heads=8, ff=2048, vocab=8000, batch=4, tokens=64,
                                       platform=generators.gpu_server())
print(problem.name, "-", problem.n, "ops,", len(problem.edges), "edges on", ", ".join(problem.device_names))

# %%
# The default method with a time limit: the best of the fast list schedulers, then
# critical-path search until the limit. Its ``method`` names the stages that ran.

result = mapsched.solve(problem, time_limit=2, seed=0)
print(f"{result.method}: makespan {result.makespan:.3f} ms, bound {result.lower_bound:.3f} ms, gap {result.gap:.1%}")
heft = mapsched.solve(problem, "heft")
print(f"heft alone: {heft.makespan:.3f} ms")

# %%
# Where the ops went: jobs per device.

jobs = {}
for job in result.jobs:
    jobs[job.device] = jobs.get(job.device, 0) + 1
print(jobs)

# %%
# The Gantt chart; past 2,000 jobs it would draw each device's busy periods instead.

fig = mapsched.plot.gantt(problem, result, title="GPT training step, 1 layer, on a 4-GPU server")
