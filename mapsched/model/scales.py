"""Units for solver rows: sizes up to 1e18 bytes and times up to 1e12 ms stated in numbers a
solver accepts (HiGHS's time scale, CP-SAT's integer ticks)."""

from __future__ import annotations

import math

import numpy as np

from mapsched.model.problem import MEMORY_SLACK

__all__ = ["HIGHS_TIME", "byte_unit", "default_resolution", "highs_time_scale", "memory_row", "start_ticks"]


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


def memory_row(sizes: np.ndarray, capacity: float, most: float | None = None,
               terms: int | None = None) -> tuple[list[int], int]:
    """Sizes and room of a memory row of ``capacity`` bytes as CP-SAT integers, where the
    row's terms, each at its largest, sum to ``most`` bytes (default: ``sizes``' sum) and at
    most ``terms`` sizes (default: as many as there are) can count at once.

    Exact in whole bytes, where every size is one and the sums fit 64 bits, the room what
    the validator lets the device hold (its :data:`~mapsched.model.problem.MEMORY_SLACK`).
    Otherwise (fractional sizes, or sizes up to 1e18 bytes) in a unit of a power of two
    bytes, sizes rounded up and the room down, so that every mapping of the model fits;
    the unit is small enough that ``terms`` roundings add less than the slack, so that
    every mapping within ``capacity`` stays in the model (a bound stays sound), unless
    the sums would then pass 2**60 units: past that (sizes near 1e18 bytes with millions
    of terms) mappings within a unit per term of the capacity can be left out.

    Examples
    --------
    >>> memory_row(np.array([100.0, 200.0]), 250.0)
    ([100, 200], 250)
    >>> sizes, room = memory_row(np.array([0.25, 0.75, 0.5]), 1.25)  # 0.25 + 0.75 fit
    >>> sizes[0] + sizes[1] <= room < sizes[0] + sizes[1] + sizes[2]
    True
    """
    most = float(sizes.sum()) if most is None else most
    terms = len(sizes) if terms is None else terms
    room = capacity * (1 + MEMORY_SLACK)
    if most <= 2.0**61 and all(b.is_integer() for b in sizes.tolist()):
        return [int(b) for b in sizes.tolist()], min(math.floor(room), 2**62)
    fine = 2.0 ** math.floor(math.log2(capacity * MEMORY_SLACK / (terms + 1)))
    unit = max(fine, 2.0 ** math.ceil(math.log2(most / 2.0**60))) if most > 0 else fine
    return [math.ceil(b / unit) for b in sizes.tolist()], min(math.floor(room / unit), 2**62)


_TICKS = 1e9
"""The ticks a CP-SAT model's horizon is put near by :func:`default_resolution`."""


def default_resolution(upper_bound: float) -> float:
    """Ticks per millisecond: a power of ten putting ``upper_bound`` near 10**9 ticks."""
    return 10.0 ** math.floor(math.log10(_TICKS / max(upper_bound, 1e-9)))


def start_ticks(ms: float, res: float) -> int:
    """A time of a schedule in ticks, rounded down, but never below a tick it misses by
    floating-point error alone.

    A start is a sum of times: 93 + 35.2 ms comes out at 128.19999999999999 ms, and at
    10**6 ticks a ms floors to a tick under the sum of its parts' ticks, so that a hint
    made of it breaks a precedence the model states in ticks. Within 10**-12 of the
    value (and 10**-9 of a tick) it counts as the tick above. O(1).

    Examples
    --------
    >>> start_ticks(93 + 35.2, 1e6), start_ticks(128.1999, 1e6)
    (128200000, 128199900)
    """
    x = ms * res
    return math.floor(x + 1e-12 * abs(x) + 1e-9)
