"""Large graphs: the default pipeline at 10,000 tasks, its time-limit fallback, its local
search, and the refusal of broken 40,000-task files."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems

import mapsched
from mapsched import solve, validate
from mapsched.generators import platform, transformer_train
from mapsched.heuristics.critical_path_search import improve
from mapsched.scheduling.best_list import LIST_SCHEDULERS
from mapsched.solve import SolveContext


def test_default_pipeline_places_a_10k_training_step():
    p = transformer_train(6, platform=platform("4-gpu-server"))
    assert p.n > 9_000
    s = solve(p, time_limit=10)
    assert validate(p, s) == []
    assert s.method.startswith("auto: ") and s.status in ("feasible", "optimal")
    assert s.makespan <= solve(p, "heft").makespan
    assert "list schedulers: heft" in s.log


def test_a_time_limit_too_short_for_the_pipeline_returns_the_first_list_schedule():
    p = mapsched.generators.random_dag(3000, 4, seed=5)
    s = solve(p, time_limit=0.05)
    assert validate(p, s) == [] and s.status == "feasible"
    assert s.method == "auto: heft" and "no critical-path search" in s.log
    assert s.makespan == solve(p, "heft").makespan


def test_small_problems_with_a_time_limit_go_to_exact():
    p = mapsched.instances.load("topcuoglu2002")
    s = solve(p, time_limit=10)
    assert s.method == "auto: exact" and s.status == "optimal" and validate(p, s) == []


@pytest.fixture(scope="module")
def tight_step():
    """A 3,191-task training step whose GPUs each hold 40% of the model (weights and
    activations): no GPU holds it, and the list schedulers must spread it."""
    data = transformer_train(2, platform=platform("4-gpu-server")).to_dict()
    p = mapsched.Problem.from_dict(data)
    need = float((p.weight + p.act).sum())
    for d in data["devices"]:
        if d["name"].startswith("gpu"):
            d["memory"] = float(int(0.4 * need))
    return mapsched.Problem.from_dict(data)


@pytest.mark.parametrize("name", LIST_SCHEDULERS["latency"])
def test_list_schedulers_on_a_memory_tight_training_step(tight_step, name):
    p = tight_step
    s = solve(p, name)
    assert validate(p, s) == []
    gpus = [u for u, d in enumerate(p.device_names) if d.startswith("gpu")]
    need = p.weight + p.act  # rule 6: what each task holds on its device
    used = np.bincount([p.device_index[j.device] for j in s.jobs],
                       weights=[need[p.task_index[j.task]] for j in s.jobs], minlength=p.m)
    assert (used[gpus] <= p.mem[gpus]).all() and used[gpus].max() > 0.5 * p.mem[gpus].max()  # the cap binds


@settings(max_examples=60, deadline=None)
@given(problems(max_tasks=12, max_devices=4), st.sampled_from(["cpop", "m-etf", "met", "m-topo"]))
def test_critical_path_search_is_valid_and_never_worse(p, start_method):
    start = solve(p, start_method)
    s = improve(p, start, SolveContext(), moves=300)
    assert validate(p, s) == []
    assert s.makespan <= start.makespan


@settings(max_examples=60, deadline=None)
@given(problems(max_tasks=12, max_devices=4, tight=True, transfers=5.0))
def test_critical_path_search_keeps_memory_where_it_moves_tasks_out_of_the_way(p):
    start = mapsched.decode(p, p.planted[:, 0])
    s = improve(p, start, SolveContext(), moves=300)
    assert validate(p, s) == []
    assert s.makespan <= start.makespan


def test_critical_path_search_moves_a_task_out_of_the_way():
    # Device a is fast and holds one task; t waits on the slow c while x, off the critical
    # path, fills a. Moving t onto a needs x moved to c at once: a swap.
    p = mapsched.Problem(
        [mapsched.Task("t", {"a": 1.0, "c": 10.0}, 10.0), mapsched.Task("x", {"a": 1.0, "c": 2.0}, 10.0)], [],
        mapsched.System((mapsched.Device("a", 10.0), mapsched.Device("c")), (mapsched.Link("a", "c", 1e6),)))
    start = mapsched.decode(p, np.array([1, 0]))
    assert start.makespan == 10.0
    s = improve(p, start, SolveContext(), moves=10)
    assert validate(p, s) == [] and s.makespan == 2.0
    assert {j.task: j.device for j in s.jobs} == {"t": "a", "x": "c"}


def test_critical_path_search_improves_a_poor_start():
    p = mapsched.generators.random_dag(300, 4, seed=3)
    start = solve(p, "met")
    s = improve(p, start, SolveContext(), moves=2000)
    assert validate(p, s) == [] and s.makespan < 0.9 * start.makespan
    assert "moves kept" in s.log


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 40,000-task transformer training step, as a dict of the file format."""
    p = transformer_train(25, platform=platform("4-gpu-server"))
    assert p.n > 39_000
    return p.to_dict(), tmp_path_factory.mktemp("big")


def _breaks(data: dict, kind: str) -> str:
    """Break the file; the text its error line must contain."""
    t = data["tasks"]
    if kind == "cycle":
        data["edges"].append({"src": data["edges"][-1]["dst"], "dst": data["edges"][0]["src"]})
        return "cycle"
    if kind == "device":
        t[20_000]["latency"]["tpu9"] = 1.0
        return "tpu9"
    t[30_000]["name"] = t[10_000]["name"]
    return t[10_000]["name"]


@pytest.mark.parametrize("kind", ["cycle", "device", "duplicate"])
def test_broken_40k_files_are_refused_in_one_line(big, kind):
    data, folder = big
    data = json.loads(json.dumps(data))
    needle = _breaks(data, kind)
    path, out = folder / f"{kind}.json", folder / f"{kind}-schedule.json"
    path.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "mapsched", "solve", str(path), "-o", str(out)],
                          capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    assert not out.exists()


def test_the_pipeline_is_deterministic_without_a_time_limit():
    p = mapsched.generators.random_dag(500, 3, seed=8)
    a, b = solve(p), solve(p)
    assert a.makespan == b.makespan
    assert np.array_equal([j.start for j in a.jobs], [j.start for j in b.jobs])
