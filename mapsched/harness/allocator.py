"""Hold the host allocator steady, so that a task's time does not depend on its history.

glibc's ``malloc`` serves large blocks (PyTorch's CPU tensors) from fresh ``mmap``
pages until a freed block raises its threshold, and gives freed memory back to the
system past a trim threshold; both thresholds move as the process runs. A task whose
activations come from fresh pages pays their page faults, so the same schedule's time
depends on the allocator's state unless the thresholds are fixed
(``benchmarks/bench_steady.py`` measures it).
:func:`steady` fixes both thresholds high for the process, as the harness's
measurements assume, so that freed blocks are reused. Memory freed by tensors then
stays with the process (its peak, not its current use, is what it holds).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["steady"]

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
"""glibc's largest mmap threshold on 64-bit systems: blocks below it come from the heap."""
TRIM_THRESHOLD = 2**31 - 1
"""Never give the heap's top back to the system (the largest int ``mallopt`` takes)."""

_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
_state: list[bool] = []


def steady() -> bool:
    """Fix glibc's mmap and trim thresholds for this process, once; whether they are fixed.

    Does nothing, and returns False, where the C library has no ``mallopt`` (not glibc)
    or where the environment sets malloc's thresholds or tunables (the user's choice
    stands). Later calls return the first call's answer. O(1).

    Examples
    --------
    >>> steady() in (True, False)
    True
    """
    if not _state:
        _state.append(_fix())
    return _state[0]


def _fix() -> bool:
    if any(v in os.environ for v in _ENVIRONMENT) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success. The mmap threshold first: fixing either one stops glibc
    # moving both, and a trim threshold fixed alone would leave every large block on fresh pages.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
