"""Units for solver rows: sizes up to 1e18 bytes and times up to 1e12 ms stated in numbers a
solver accepts."""

from __future__ import annotations

import math

__all__ = ["HIGHS_TIME", "byte_unit", "highs_time_scale"]


def byte_unit(largest: float, most: float) -> float:
    """The least power of two, 1 or more, that brings ``largest`` bytes down to ``most`` units.

    Sizes reach 1e18 bytes: a memory row in bytes overflows CP-SAT's 64-bit sums, and
    HiGHS refuses coefficients beyond 1e15. Models state such rows in this unit instead;
    a power of two divides every size exactly.
    """
    if not largest > most:
        return 1.0
    mantissa, k = math.frexp(largest / most)  # ratio = mantissa 2^k, mantissa in [0.5, 1)
    return 2.0 ** (k - 1 if mantissa == 0.5 else k)


HIGHS_TIME = 2.0**10
"""Largest time a HiGHS model states, in its own unit (see :func:`highs_time_scale`)."""


def highs_time_scale(largest: float) -> float:
    """The factor, a power of two of at most 1 (exact in floating point), that brings a
    model's times, the longest ``largest`` ms, to at most :data:`HIGHS_TIME`.

    HiGHS's tolerances are absolute (1e-7): with times of 1e9 ms beside binary variables its
    MIP proved bounds above the optimum (12-31% in hypothesis' cases) and marked a worse
    schedule optimal. Its models count time in units of ``1 / factor`` ms instead.

    >>> highs_time_scale(80.0), highs_time_scale(4096.0)
    (1.0, 0.25)
    """
    return 1.0 / byte_unit(largest, HIGHS_TIME) if math.isfinite(largest) else 1.0
