"""Problem families for training and testing learned policies (issue 70)."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapsched import OptionError, Problem, solve, validate
from mapsched.instances.families import FAMILIES, HELD_OUT, TRAINING, family_cases, family_problem, parse_families


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(FAMILIES), st.integers(0, 2**40))
def test_each_family_draws_a_valid_acyclic_problem_deterministically(family, seed):
    p = family_problem(family, seed, tasks=(10, 60))
    assert isinstance(p, Problem) and p.objective.kind == "latency"
    g = nx.DiGraph(list(zip(p.src.tolist(), p.dst.tolist())))
    assert nx.is_directed_acyclic_graph(g)
    assert p.can_run.any(axis=1).all() and 3 <= p.m <= 30
    if family not in ("giph", "giph-alt", "dnn", "wired"):  # these set their own sizes
        assert 10 <= p.n <= 60
    assert family_problem(family, seed, tasks=(10, 60)).to_json(None) == p.to_json(None)
    r = solve(p, "heft")
    assert validate(p, r) == []


def test_giph_alt_is_the_issues_description():
    p = family_problem("giph-alt", 4)
    assert (p.n, p.m) == (30, 20)
    assert len(np.flatnonzero(np.bincount(p.dst, minlength=p.n) == 0)) == 1  # one entry
    assert len(np.flatnonzero(np.bincount(p.src, minlength=p.n) == 0)) == 1  # one exit
    assert ((p.nbytes >= 50e6) & (p.nbytes <= 150e6)).all()
    off = ~np.eye(p.m, dtype=bool)
    assert ((p.link_latency[off] >= 5) & (p.link_latency[off] <= 15)).all()


def test_communication_to_computation_ratios_span_two_decades():
    ratios = []
    for p in family_cases(["random", "layered"], 40):
        task = np.mean(p.dur[p.can_run])
        transfer = np.mean(p.link_latency[0, 1] + p.nbytes * p.link_ms_per_byte[0, 1])
        ratios.append(transfer / task)
    assert min(ratios) < 0.3 and max(ratios) > 3


def test_training_and_held_out_families_are_apart_and_names_are_checked():
    assert not set(TRAINING) & set(HELD_OUT) and len(HELD_OUT) >= 3
    assert parse_families("random, dnn") == ("random", "dnn")
    for bad in ("random,nope", "random,random", ""):
        with pytest.raises(OptionError, match="--families: expected distinct names"):
            parse_families(bad)
