"""A linear programme in HiGHS whose rows are gathered, then added in one call.

The relaxation bounds (:mod:`mapsched.bounds.relaxation`,
:mod:`mapsched.bounds.batched`) add thousands of sparse rows, then cuts in rounds; adding
them one at a time through highspy costs more than solving.
"""

from __future__ import annotations

import math
import time

import numpy as np

from mapsched.engine import interrupt

__all__ = ["SETUP", "RowProgramme"]

SETUP = 2e-5
"""Seconds per column that a relaxation bound needs before it is worth starting: about a
third of what its list schedule, its build and its first LP take per column on batched
and latency problems alike. Below it no LP would finish, and the list schedule and the
build alone would overrun a short time limit."""


class RowProgramme:
    """A HiGHS model (single-threaded, silent) with a buffer of rows ``(lower, upper,
    {column: coefficient})``: :meth:`flush` adds them, :meth:`run` solves until ``deadline``
    (a ``time.perf_counter()`` value). Subclasses add the columns."""

    def __init__(self, deadline: float) -> None:
        import highspy

        self.hs = highspy
        self.deadline = deadline
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        highspy.Highs.resetGlobalScheduler(True)  # one pool per process, sized by the first solve (milp.run_highs)
        self.h.setOptionValue("threads", 1)
        self.rows: list[tuple[float, float, dict[int, float]]] = []
        self.f = 1.0  # the programme counts time in units of 1 / f ms (units.highs_time_scale)

    def flush(self) -> None:
        """Add the buffered rows to the model."""
        if not self.rows:
            return
        starts, index, value = [0], [], []
        for _, _, row in self.rows:
            index += row.keys()
            value += row.values()
            starts.append(len(index))
        lo = np.array([r[0] for r in self.rows])
        hi = np.array([r[1] for r in self.rows])
        self.h.addRows(len(self.rows), lo, hi, len(index), np.array(starts[:-1], dtype=np.int32),
                       np.array(index, dtype=np.int32), np.array(value, dtype=float))
        self.rows = []

    def run(self) -> bool:
        """Solve until the deadline; whether HiGHS proved the optimum."""
        left = self.deadline - time.perf_counter()
        if left <= 0:
            return False
        self.h.setOptionValue("time_limit", left)
        self.h.HandleUserInterrupt = True  # a Ctrl-C or SIGTERM (mapsched.engine.interrupt) cancels it
        with interrupt.on_stop(self.h.cancelSolve):
            self.h.run()
        return self.h.getModelStatus() == self.hs.HighsModelStatus.kOptimal

    def value(self) -> float:
        """The objective value of the last solve, in ms."""
        return float(self.h.getInfo().objective_function_value) / self.f

    def dual_bound(self) -> float:
        """The mixed-integer solve's proved bound, in ms (0 where it proved none). Not its
        objective: "optimal" leaves a gap of up to mip_rel_gap (1e-4) above the dual bound."""
        bound = self.h.getInfo().mip_dual_bound
        return float(bound) / self.f if math.isfinite(bound) else 0.0
