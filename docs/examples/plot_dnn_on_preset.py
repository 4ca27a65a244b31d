"""
A DNN on a CPU + T4 + A100 machine
==================================

:mod:`mapsched.generators` builds DNN-shaped problems with a cost model of real device
classes (see :doc:`/cost-model`). Here an Inception-like network runs on the
``cpu-t4-a100`` preset; several methods are compared by their gap to the proved lower
bound, the fraction by which a schedule could at most be improved.
"""

import matplotlib.pyplot as plt

import mapsched
from mapsched import generators

problem = generators.inception(blocks=4, platform=generators.cpu_t4_a100())
print(problem.name, "-", problem.n, "tasks on", ", ".join(problem.device_names))

# %%
# Each method gets the same short time limit. ``gap`` is
# ``(makespan - lower_bound) / makespan``. On a graph this small ``auto`` runs the exact
# model, which proves its schedule optimal (gap 0) when the solver finishes within the
# limit; on a slower or busier machine it may stop first, with a smaller gap than the
# list schedulers' all the same.

results = {}
for method in ("single-best", "met", "heft", "peft", "auto"):
    results[method] = mapsched.solve(problem, method, time_limit=3, seed=0)
    r = results[method]
    print(f"{method:12s} makespan {r.makespan:8.3f} ms   bound {r.lower_bound:8.3f} ms   gap {r.gap:6.1%}")

# %%
# The best proved bound over all results bounds every schedule of the problem.

bound = max(r.lower_bound for r in results.values())
fig, ax = plt.subplots(figsize=(7, 3.5))
names = list(results)
ax.barh(names, [results[m].makespan for m in names], color="tab:blue")
ax.axvline(bound, color="tab:red", linestyle="--", label=f"lower bound {bound:.3f} ms")
ax.set_xlabel("makespan (ms)")
ax.set_title(f"{problem.name} on cpu-t4-a100")
ax.legend(loc="lower right")
fig.tight_layout()

# %%
# The best schedule, drawn as a Gantt chart.

best = min(results.values(), key=lambda r: r.makespan)
fig = mapsched.plot.gantt(problem, best, title=f"{problem.name}: {best.method}")
