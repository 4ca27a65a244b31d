"""``bound``: a proved lower bound on a problem's makespan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mapsched.checks import seconds_arg
from mapsched.cli.common import DASK_HELP, PROBLEM_HELP, closing, cluster, dask_address, left, load_problem, local_limit
from mapsched.engine import interrupt
from mapsched.errors import OptionError


def add_bound(sub: Any) -> None:
    """The ``bound`` command's parser."""
    b = sub.add_parser("bound", help="print a proved lower bound on the makespan")
    b.add_argument("problem", help=PROBLEM_HELP)
    b.add_argument("--json", action="store_true")
    b.add_argument("--fast", action="store_true",
                   help="only the quick bounds: critical path, total work, load LP, and the interval load LP "
                        "(latency) or the batched relaxation's LP (throughput)")
    b.add_argument("--time-limit", type=seconds_arg, default=60.0,
                   help="seconds for the relaxation, module-chain and window bounds")
    b.add_argument("--window-time", type=seconds_arg, default=1.0,
                   help="seconds per window solve (5 raises the bound a little on large stacks, given time)")
    b.add_argument("--dask", metavar="ADDRESS", type=dask_address, help=DASK_HELP + " (the chain and window solves)")
    b.set_defaults(handler=cmd_bound)


def cmd_bound(args: argparse.Namespace) -> int:
    """``bound``: print a proved lower bound (the quick ones with ``--fast``)."""
    from mapsched.bounds import lower_bound
    from mapsched.split import full_bound

    if args.fast and args.dask is not None:  # the address went unchecked and unused
        raise OptionError("--dask: the --fast bound runs in this process; leave out --dask or --fast")
    local_limit(args)
    p = load_problem(args.problem)
    # A first Ctrl-C or SIGTERM stops the solvers (HiGHS too, whose MIP held the main thread
    # past a SIGTERM until killed) and prints the best bound proved before.
    with cluster(args.dask) as executor, interrupt.graceful():
        b = lower_bound(p) if args.fast else full_bound(p, left(args, closing(args.dask)), args.window_time,
                                                        executor)
        lost, stopped = getattr(executor, "lost", False), interrupt.requested()
    if lost or stopped:
        why = "interrupted" if stopped else "the Dask scheduler was lost mid-run"
        print(f"mapsched: {why}; the bound is the best proved before", file=sys.stderr)
    if args.json:
        print(json.dumps({"lower_bound": b.value, "rule": b.rule}))
    else:
        print(f"lower bound {b.value:.6g} ms ({b.rule})")
    return 130 if stopped else 0
