"""Units for solver rows: sizes up to 1e18 bytes stated in numbers a solver accepts."""

from __future__ import annotations

import math

__all__ = ["byte_unit"]


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
