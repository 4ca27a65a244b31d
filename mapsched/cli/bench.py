"""``bench``: run a benchmark suite (resumable) and print its tables and quality plot."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mapsched.checks import count_arg, seconds_arg
from mapsched.cli.common import DASK_HELP, ProgressBar, cluster, dask_address
from mapsched.engine import registry
from mapsched.errors import MapschedError, OptionError, shown
from mapsched.model import files
from mapsched.model.files import check_output
from mapsched.solve import MAX_THREADS


def add_bench(sub: Any) -> None:
    """The ``bench`` command's parser."""
    bn = sub.add_parser("bench", help="run a benchmark suite (resumable) and print its tables")
    bn.add_argument("suite")
    bn.add_argument("--suites", help="a Python file defining SUITES, run as code (default: the built-in suites)")
    bn.add_argument("-o", "--output", help="JSON Lines results (default SUITE.jsonl); rows there are kept. The "
                    "quality plot goes beside it, as NAME-quality.png")
    bn.add_argument("--workers", type=count_arg(0, MAX_THREADS), default=1, help="runs at once (0: one per core)")
    bn.add_argument("--threads", type=count_arg(0, MAX_THREADS), default=0,
                    help="solver threads per run (0: the cores shared out)")
    bn.add_argument("--time-limit", type=seconds_arg, default=None, help="override the suite's per-method limit")
    bn.add_argument("--dask", metavar="ADDRESS", type=dask_address, help=DASK_HELP + " (one run per task)")
    bn.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    """``bench``: run a suite's missing rows, then print its tables and draw its quality plot."""
    from mapsched.bench import sweep

    if args.suites is None:
        from mapsched.bench.suites import SUITES
    else:  # a user's file of suites is Python code, run as such: only when named
        SUITES = sweep.load_suites(args.suites)
    if args.suite not in SUITES:
        raise OptionError(f"suite: unknown suite {shown(args.suite)}; expected one of {sorted(SUITES)}")
    suite = SUITES[args.suite]
    if not isinstance(suite, sweep.Suite):
        raise OptionError(f"suite: SUITES[{shown(args.suite)}] is not a mapsched.bench.sweep.Suite")
    suite.check()
    out = f"{suite.name}.jsonl" if args.output is None else args.output
    inputs = [args.suites] if args.suites else []
    check_output(out, inputs)
    # The plot goes beside the rows, never on them; not beside a device such as /dev/null.
    plot = None if files.is_stream(out) else f"{os.path.splitext(out)[0]}-quality.png"
    if plot is not None:
        check_output(plot, [*inputs, out])
    known = registry.methods()
    objective = suite.cases[0].build().objective.kind
    methods = tuple(m for m in suite.methods
                    if m == sweep.BOUND or (m in known and objective in registry.get(m).objectives))
    if not methods:
        raise OptionError(f"suite: none of SUITES[{shown(args.suite)}]'s methods {list(suite.methods)} is a method for "
                          f"the {objective} objective here; see 'mapsched methods'")
    suite = sweep.Suite(suite.name, suite.cases, methods, args.time_limit or suite.time_limit, suite.options,
                        suite.description)
    if args.dask is not None and args.workers != 1:  # it was ignored without a word
        raise OptionError("--workers: the runs go to the --dask cluster's workers; leave out --workers")
    with cluster(args.dask) as executor, \
            ProgressBar(f"bench {suite.name}, runs left", None, enabled=sys.stderr.isatty()) as bar:
        rows = sweep.run_suite(suite, out, executor, workers=args.workers, threads=args.threads,
                               progress=lambda d, t: bar(0, float(t - d)))
    rows = [r for r in rows if r["method"] in methods]
    print(f"## {suite.name}: {suite.description}\n")
    print(sweep.results_table(rows, methods, "throughput" if objective == "throughput" else "makespan"))
    if any("simulated" in r for r in rows):
        print("\n" + sweep.results_table(rows, methods, "simulated"))
    if any("slr_simulated" in r for r in rows):
        print("\n" + sweep.results_table(rows, methods, "slr_simulated"))
    if "exact" in methods and "split" in methods:
        print("\n" + sweep.runtime_table(rows))
    if plot is None:
        print(f"\nno plot beside {out}, which is no regular file")
        return 0
    try:
        sweep.plot_quality(rows, plot)
        print(f"\nwrote {plot}; raw rows in {out}")
    except MapschedError as exc:
        print(f"\nno plot: {exc}; raw rows in {out}")
    return 0
