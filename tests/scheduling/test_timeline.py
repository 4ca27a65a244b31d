"""The insertion index of Timeline against the linear scan it replaced (issue 25).

The index must give the scan's answers to the bit: the same start and slot for every
query, hence the same schedules from every method that places jobs by insertion.
Small block sizes make short sequences close, measure and split blocks.
"""

import math
from bisect import bisect_right
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems, random_owner

from mapsched import Objective
from mapsched.errors import InfeasibleError
from mapsched.generators import random_dag
from mapsched.heuristics.cpop import cpop
from mapsched.heuristics.heft import heft
from mapsched.scheduling import decoder
from mapsched.scheduling.decoder import Decoder, Timeline
from mapsched.solve import SolveContext

BLOCKS = [2, 5, decoder._BLOCK]  # the smallest block the index allows, an odd one, and the default


class ScanTimeline:
    """Timeline as it was before the index: per device two sorted lists, scanned from ``ready``."""

    def __init__(self, m: int, insertion: bool = False) -> None:
        self.insertion = insertion
        self.starts: list[list[float]] = [[] for _ in range(m)]
        self.ends: list[list[float]] = [[] for _ in range(m)]

    def earliest(self, u: int, ready: float, d: float) -> tuple[float, int]:
        starts, ends = self.starts[u], self.ends[u]
        if not self.insertion:
            return (ends[-1] if ends and ends[-1] > ready else ready), len(ends)
        s = ready
        for k in range(bisect_right(ends, ready), len(starts)):
            if s + d <= starts[k]:
                return s, k
            if ends[k] > s:
                s = ends[k]
        return s, len(starts)

    def reserve(self, u: int, s: float, e: float, slot: int) -> None:
        self.starts[u].insert(slot, s)
        self.ends[u].insert(slot, e)

    def place(self, u: int, ready: float, d: float) -> float:
        s, slot = self.earliest(u, ready, d)
        self.reserve(u, s, s + d, slot)
        return s

    def busy(self, u: int) -> tuple[list[float], list[float]]:
        return list(self.starts[u]), list(self.ends[u])


# Small integers and halves make touching intervals and exact fits; wide floats make
# rounding; subnormal, huge and negative times stress the margin of the index's filter.
TIMES = st.one_of(
    st.integers(0, 60).map(float), st.integers(0, 120).map(lambda x: x / 2), st.floats(-1e3, 1e3),
    st.floats(0, 1e15), st.sampled_from([0.0, 5e-324, 1e-300, 2.0**-1022, 0.1, 0.3]),
)
LENGTHS = st.one_of(
    st.just(0.0), st.integers(0, 6).map(float), st.floats(0, 10), st.floats(0, 1e15),
    st.sampled_from([5e-324, 1e-300, 0.1, 0.2]),
)


def _check_index(g: decoder._Gaps) -> None:
    """The index is tight, not merely safe: every measured key is its gap, every tree node
    the max (longest gap) or sum (intervals) of its children."""
    top, count, cap = g.top, g.count, g.cap
    prev = None
    for j, (starts, ends, keys) in enumerate(zip(g.starts, g.ends, g.keys)):
        assert 0 < len(starts) <= decoder._BLOCK and g.last[j] == ends[-1] and count[cap + j] == len(starts)
        gaps = [-math.inf if prev is None else starts[0] - prev, *(b - a for a, b in zip(ends, starts[1:]))]
        assert (keys is None and top[cap + j] == math.inf) or (keys == gaps and top[cap + j] == max(gaps))
        prev = ends[-1]
    assert all(top[i] == max(top[2 * i], top[2 * i + 1]) for i in range(1, cap))
    assert all(count[i] == count[2 * i] + count[2 * i + 1] for i in range(1, cap))
    assert g.closed == sum(map(len, g.starts)) and len(g.tail_starts) <= decoder._BLOCK
    if g.tail_at == g.closed + len(g.tail_starts):
        assert g.tail_top == max(b - a for a, b in zip([prev, *g.tail_ends], g.tail_starts))


def _near(data: st.DataObject, values: list[float]) -> float:
    """One of ``values``, or the float just below or above it."""
    x = data.draw(st.sampled_from(values))
    return data.draw(st.sampled_from([x, math.nextafter(x, -math.inf), math.nextafter(x, math.inf)]))


@pytest.mark.parametrize("block", BLOCKS)
@given(st.data())
def test_index_answers_as_the_scan(block, data):
    """Random queries and reservations, with readies on interval edges and lengths equal to
    gaps (and a float off either way): same (start, slot) and same intervals throughout."""
    with mock.patch.object(decoder, "_BLOCK", block):
        new, old = Timeline(1, insertion=True), ScanTimeline(1, insertion=True)
        for _ in range(data.draw(st.integers(1, 150))):
            starts, ends = old.busy(0)
            gaps = [b - a for a, b in zip(ends, starts[1:])]
            ready = _near(data, starts + ends) if starts and data.draw(st.booleans()) else data.draw(TIMES)
            d = _near(data, gaps) if gaps and data.draw(st.booleans()) else data.draw(LENGTHS)
            d = max(d, 0.0)
            s, slot = new.earliest(0, ready, d)
            assert (s, slot) == old.earliest(0, ready, d)
            if data.draw(st.integers(0, 3)):
                new.reserve(0, s, s + d, slot)
                old.reserve(0, s, s + d, slot)
                assert new.busy(0) == old.busy(0)
            _check_index(new._gaps[0])


@pytest.mark.parametrize("block", BLOCKS)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3)), min_size=1, max_size=300))
def test_place_as_the_scan(block, jobs):
    """Integer times: many ties, touching and zero-length intervals, gaps filled exactly."""
    with mock.patch.object(decoder, "_BLOCK", block):
        new, old = Timeline(2, insertion=True), ScanTimeline(2, insertion=True)
        for i, (ready, d) in enumerate(jobs):
            assert new.place(i % 2, float(ready), float(d)) == old.place(i % 2, float(ready), float(d))
        assert [new.busy(u) for u in range(2)] == [old.busy(u) for u in range(2)]


def test_append_mode_is_unchanged():
    new, old = Timeline(1), ScanTimeline(1)
    for ready, d in [(0.0, 2.0), (1.0, 1.0), (5.0, 0.0), (0.0, 3.0), (9.0, 1.0)]:
        assert new.place(0, ready, d) == old.place(0, ready, d)
    assert new.busy(0) == old.busy(0)


def _schedules(p, owners, methods):
    """Decoded schedules (insertion) of each owner array, then each method's schedule or error."""
    out = [Decoder(p, insertion=True).schedule(owner).jobs for owner in owners]
    for method in methods:
        try:
            out.append(method(p, SolveContext()).jobs)
        except InfeasibleError as err:
            out.append(str(err))
    return out


def _same_as_scan(p, owners, methods, block):
    with mock.patch.object(decoder, "_BLOCK", block):
        got = _schedules(p, owners, methods)
    with mock.patch.object(decoder, "Timeline", ScanTimeline):
        want = _schedules(p, owners, methods)
    assert got == want


@pytest.mark.parametrize("block", [2, decoder._BLOCK])
@given(problems(max_tasks=10, throughput=None), st.integers(0, 2**32 - 1))
def test_methods_schedule_as_with_the_scan(block, p, seed):
    """heft and cpop (bheft when batched) and the insertion decoder place every job where
    the scan did, on small random problems."""
    owners = [p.planted]
    owner = random_owner(p, np.random.default_rng(seed))
    if Decoder(p).infeasibility(owner) is None:
        owners.append(owner)
    _same_as_scan(p, owners, [heft] if p.L > 1 else [heft, cpop], block)


@pytest.mark.parametrize("n, m, seed", [(600, 3, 0), (600, 5, 1), (1500, 4, 2)])
def test_large_schedules_as_with_the_scan(n, m, seed):
    """Long device timelines, where searches cross many blocks."""
    p = random_dag(n, m, seed)
    owner = np.random.default_rng(seed).integers(m, size=(n, 1))
    for block in (4, decoder._BLOCK):
        _same_as_scan(p, [owner], [heft, cpop], block)


def test_batched_schedules_as_with_the_scan():
    p = random_dag(300, 4, 3, objective=Objective("throughput", 4))
    owner = np.random.default_rng(3).integers(p.m, size=(p.n, p.L))
    for block in (4, decoder._BLOCK):
        _same_as_scan(p, [owner], [heft], block)
