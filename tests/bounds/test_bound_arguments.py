"""The public bound functions refuse bad arguments in one line (mapsched.arguments): they
raised IndexError, TypeError or ValueError from NumPy and SciPy, or quietly bounded
something else (task -1 is the last task; a negative time limit dropped the load LP)."""

import math

import numpy as np
import pytest

from mapsched import Objective, OptionError, instances
from mapsched.bounds import (
    SubsetBound,
    batched_relaxation_bound,
    critical_path_bound,
    interval_load_bound,
    load_bound,
    lower_bound,
    slr,
    stage_bound,
    two_part_bound,
    work_bound,
)
from mapsched.generators import stack
from mapsched.split import chain_bound, full_bound, window_bound

P = instances.load("topcuoglu2002")
T = stack(modules=2, n=4, objective=Objective("throughput", 2), seed=1)


@pytest.mark.parametrize("call, says", [
    (lambda: lower_bound(P, "1"), "time_limit: expected a positive number of seconds"),
    (lambda: lower_bound(P, -1), "time_limit: expected a positive number of seconds"),
    (lambda: lower_bound(P, math.nan), "time_limit"),
    (lambda: lower_bound(P, batched="no"), "batched: expected True or False"),
    (lambda: load_bound(P, "1"), "time_limit"),
    (lambda: interval_load_bound(P, cuts=0), "cuts: expected an integer of at least 1"),
    (lambda: interval_load_bound(P, cuts=1.5), "cuts"),
    (lambda: interval_load_bound(P, columns="a"), "columns"),
    (lambda: interval_load_bound(P, columns=-1), "columns: expected an integer of at least 0"),
    (lambda: batched_relaxation_bound(T, "1"), "time_limit"),
    (lambda: batched_relaxation_bound(T, integral="no"), "integral: expected True or False"),
    (lambda: batched_relaxation_bound(T, cuts_per_round=True), "cuts_per_round"),
    (lambda: stage_bound(T, [[99]]), "blocks[0]: expected task indices from 0 to 13, got 99"),
    (lambda: stage_bound(T, [[]]), "blocks[0]: expected at least one task index"),
    (lambda: stage_bound(T, [["t1"]]), "blocks[0]: expected task indices"),
    (lambda: stage_bound(T, [1, 2]), "blocks[0]: expected a collection of task indices"),
    (lambda: stage_bound(T, None), "blocks: expected a sequence"),
    (lambda: stage_bound(T, [[0]], deadline="x"), "deadline"),
    (lambda: two_part_bound(T, [[-1], [0]]), "got -1"),
    (lambda: two_part_bound(T, [[0.5], [1]]), "got 0.5"),
    (lambda: SubsetBound(P)([99]), "tasks: expected task indices from 0 to 9, got 99"),
    (lambda: SubsetBound(P)([-1]), "got -1"),
    (lambda: SubsetBound(P)([]), "at least one task"),
    (lambda: slr(P, None), "result: expected a schedule or a makespan"),
    (lambda: critical_path_bound(None), "problem: expected a mapsched.Problem"),
    (lambda: work_bound("p.json"), "problem: expected a mapsched.Problem"),
    # TypeError and AttributeError, or True taken as one thread or one second
    (lambda: full_bound("p.json"), "problem: expected a mapsched.Problem"),
    (lambda: full_bound(P, time_limit="5"), "time_limit: expected a positive number of seconds"),
    (lambda: full_bound(P, window_time_limit=True), "window_time_limit: expected a positive number"),
    (lambda: chain_bound("x"), "problem: expected a mapsched.Problem"),
    (lambda: chain_bound(P, time_limit="5"), "time_limit: expected a positive number of seconds"),
    (lambda: chain_bound(P, module_time_limit=-1), "module_time_limit: expected a positive number"),
    (lambda: chain_bound(P, span=0), "span: expected an integer of at least 1"),
    (lambda: window_bound(None), "problem: expected a mapsched.Problem"),
    (lambda: window_bound(P, threads=True), "threads: expected an integer of at least 1"),
])
def test_bad_arguments_are_one_line_option_errors(call, says):
    with pytest.raises(OptionError, match=r"^[^\n]*$") as info:
        call()
    assert says in str(info.value)


def test_numpy_values_are_arguments_too():
    assert SubsetBound(P)(np.array([0, 1, 2])) == SubsetBound(P)([0, 1, 2])
    assert lower_bound(P, np.float64(5.0)).value == lower_bound(P, 5.0).value
    assert stage_bound(T, [np.arange(7), np.arange(7, 14)], deadline=math.inf) > 0
