"""The number checks of mapsched.checks: each takes good values (NumPy ones too) and refuses bad
ones in one line that names the field, with the error class the caller gives."""

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from mapsched import checks
from mapsched.errors import OptionError, ProblemError, ScheduleError


def refused(call, message, err=OptionError):
    with pytest.raises(err, match="^" + re.escape(message)):
        call()


def test_real_is_a_number_not_a_bool():
    assert all(checks.real(v) for v in (0, -2.5, np.float32(1), np.int64(3), Fraction(1, 3), math.inf, math.nan))
    assert not any(checks.real(v) for v in (True, np.bool_(False), "1", None, [1], 1j))


def test_as_float_takes_ints_past_the_float_range_as_infinities():
    assert checks.as_float(10**400) == math.inf and checks.as_float(-(10**400)) == -math.inf
    assert checks.as_float(np.float32(0.5)) == 0.5 and type(checks.as_float(3)) is float


@pytest.mark.parametrize("value", [0, 1, 2.5, np.float64(7), np.int32(2), 1e12])
def test_number_takes_numbers_in_its_range(value):
    got = checks.number(value, "latency", 0.0, 1e12)
    assert got == float(value) and type(got) is float


@pytest.mark.parametrize("value, kwargs, message", [
    ("fast", {}, "latency: expected a number, got 'fast'"),
    (True, {}, "latency: expected a number, got True"),
    (None, {}, "latency: expected a number, got None"),
    (math.nan, {}, "latency: expected a finite number, got nan"),
    (math.inf, {"high": math.inf}, "latency: expected a finite number, got inf"),
    (10**400, {}, "latency: expected a finite number, got 1000"),
    (-1, {}, "latency: expected a number from 0 to 1e+12 ms, got -1"),
    (2e12, {}, "latency: expected a number from 0 to 1e+12 ms, got 2000000000000.0"),
    (0, {"above": True}, "latency: expected a number above 0 and up to 1e+12 ms, got 0"),
    (-1, {"high": math.inf}, "latency: expected a number of at least 0 ms, got -1"),
    (0, {"high": math.inf, "above": True}, "latency: expected a number above 0 ms, got 0"),
])
def test_number_refuses_what_is_out_of_range_and_names_the_field(value, kwargs, message):
    kwargs = {"low": 0.0, "high": 1e12, "unit": " ms", **kwargs}
    refused(lambda: checks.number(value, "latency", **kwargs), message)


def test_number_options_none_infinities_the_upper_end_alone_and_the_error_class():
    assert checks.number(None, "bound", none=True) is None
    refused(lambda: checks.number("x", "bound", none=True), "bound: expected a number or None, got 'x'")
    assert checks.number(math.inf, "memory", 0.0, 1e18, above=True, infinite=True) == math.inf  # unlimited
    refused(lambda: checks.number(-math.inf, "memory", 0.0, 1e18, infinite=True),
            "memory: expected a number from 0 to 1e+18, got -inf")
    refused(lambda: checks.number(11, "--lr", high=10), "--lr: expected a number of at most 10, got 11")
    refused(lambda: checks.number(-1, "edges[0].bytes", 0, 1, err=ProblemError), "edges[0].bytes: expected", ProblemError)
    refused(lambda: checks.number(math.nan, "makespan", err=ScheduleError), "makespan: expected a finite number",
            ScheduleError)


@pytest.mark.parametrize("value", [0, 3, 1024, np.int64(5), np.uint8(1)])
def test_integer_takes_integers_in_its_range(value):
    got = checks.integer(value, "threads", 0, 1024)
    assert got == value and type(got) is int


@pytest.mark.parametrize("value", [-1, 1025, 2.0, 2.5, True, "3", None, math.nan])
def test_integer_refuses_others_and_names_the_range(value):
    refused(lambda: checks.integer(value, "--threads", 0, 1024), "--threads: expected an integer from 0 to 1024, got ")


def test_integer_without_an_upper_end_and_with_none():
    assert checks.integer(10**30, "seed") == 10**30
    assert checks.integer(None, "seed", none=True) is None
    refused(lambda: checks.integer(-1, "--seed", 0, none=True), "--seed: expected an integer of at least 0 or None, got -1")
    refused(lambda: checks.integer(0, "repeats", 1, err=ProblemError), "repeats: expected an integer of at least 1",
            ProblemError)


def test_count_is_an_integer_with_no_upper_end():
    assert checks.count(np.int64(4), "cuts") == 4 and checks.count(None, "columns", none=True) is None
    refused(lambda: checks.count(0, "cuts"), "cuts: expected an integer of at least 1, got 0")
    refused(lambda: checks.count(1.5, "threads", least=0), "threads: expected an integer of at least 0, got 1.5")


def test_seconds_are_positive_and_may_be_unlimited():
    assert checks.seconds(2, "time_limit") == 2.0 and checks.seconds(math.inf, "time_limit") == math.inf
    assert checks.seconds(None, "time_limit") is None
    assert checks.seconds(10**400, "time_limit") == math.inf  # was an OverflowError
    for bad in (0, -1, math.nan, "5", True):
        refused(lambda bad=bad: checks.seconds(bad, "time_limit"), "time_limit: expected a positive number of seconds or None")
    refused(lambda: checks.seconds(None, "deadline", none=False), "deadline: expected a positive number of seconds, got None")


def test_flag_is_a_bool_only():
    assert checks.flag(True, "batched") is True and checks.flag(np.bool_(False), "batched") is False
    for bad in (1, "true", None):
        refused(lambda bad=bad: checks.flag(bad, "batched"), "batched: expected True or False, got ")


def test_probability_is_a_number_from_0_to_1():
    assert checks.probability(0, "conn_prob") == 0.0 and checks.probability(np.float32(1), "conn_prob") == 1.0
    for bad in (-0.1, 1.5, math.nan, True, "0.5"):
        refused(lambda bad=bad: checks.probability(bad, "conn_prob"), "conn_prob: expected a probability in [0, 1], got ")
