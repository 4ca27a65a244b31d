"""
A small benchmark sweep
=======================

:mod:`mapsched.bench` runs every method of a suite on every case, appends one JSON row
per run to a results file (a rerun resumes it), prints tables and plots each method's
best makespan over time. ``mapsched bench SUITE`` does the same from the shell; this
suite is tiny so that it runs in seconds.
"""

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from mapsched import bench, generators

suite = bench.Suite(
    "tiny",
    (bench.Case("er12", generators.random_wired, {"n": 12, "seed": 0}),
     bench.Case("er12b", generators.random_wired, {"n": 12, "seed": 1})),
    ("met", "heft", "sa", "exact", bench.BOUND),
    time_limit=1.0,
    options={"sa": {"iterations": 300}},
)

# %%
# Run it, one run at a time. By default the runs go to worker processes; any
# ``concurrent.futures`` executor (or a Dask client) can take them instead, here a
# thread of this process. The rows carry each method's makespan, bound, status, solve
# time and its history of improvements.

folder = tempfile.mkdtemp()
with ThreadPoolExecutor(1) as executor:
    rows = bench.run_suite(suite, os.path.join(folder, "tiny.jsonl"), executor=executor)
print(bench.results_table(rows))

# %%
# Quality over time on the first case: each method's best makespan against seconds.

path = os.path.join(folder, "tiny-quality.png")
bench.plot_quality(rows, path)

# %%
# ``plot_quality`` writes its figure to a file; here it is shown again.

import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(7, 4))
ax.imshow(mpimg.imread(path))
ax.axis("off")
