"""The validator catches each of the seven rules of FORMAT.md on hand-built wrong schedules."""

import copy
import dataclasses
import importlib.util
import json

import pytest

from mapsched import Job, Problem, decode, instances, validate
from mapsched.cli import main

P = instances.load("topcuoglu2002")
GOOD = decode(P, [0] * P.n)  # everything on p1, back to back


def with_jobs(jobs, **kw):
    return dataclasses.replace(GOOD, jobs=jobs, **kw)


def job(name):
    return next(j for j in GOOD.jobs if j.task == name)


def replace_job(name, **kw):
    return with_jobs([dataclasses.replace(j, **kw) if j.task == name else j for j in GOOD.jobs])


def rules(schedule, problem=P):
    return sorted({v.rule for v in validate(problem, schedule)})


def test_good_schedule_is_valid():
    assert validate(P, GOOD) == []
    assert GOOD.makespan == 127


def test_rule1_unknown_names_and_batch_size():
    assert rules(replace_job("t10", device="p9")) == [1, 3]  # unknown job dropped: t10 unrun
    assert rules(replace_job("t10", task="t99")) == [1, 3]  # and t10 is then run by no job
    # a batch of 2 on a device that only runs batch size 1
    assert rules(replace_job("t10", inputs=(0, 1))) == [1, 3]


def test_rule1_device_cannot_run_task():
    d = P.to_dict()
    del d["tasks"][9]["latency"]["p1"]
    q = Problem.from_dict(d)
    assert rules(GOOD, q) == [1]


def test_rule2_duration_and_negative_start():
    j = job("t10")
    assert rules(replace_job("t10", end=j.end + 1), ) == [2, 7]
    shifted = with_jobs([dataclasses.replace(x, start=x.start - 20, end=x.end - 20) for x in GOOD.jobs],
                        makespan=GOOD.makespan - 20, throughput=1000 / (GOOD.makespan - 20))
    assert rules(shifted) == [2]


def test_rule3_inputs_partition():
    assert rules(with_jobs([j for j in GOOD.jobs if j.task != "t5"])) == [3]
    extra = copy.copy(job("t5"))
    assert 3 in rules(with_jobs(GOOD.jobs + [extra]))
    assert 3 in rules(replace_job("t5", inputs=(1,)))


def test_rule4_precedence_and_communication():
    j1, j2 = job("t1"), job("t2")
    assert rules(replace_job("t2", start=j1.end - 1, end=j1.end - 1 + (j2.end - j2.start))) == [4, 5]
    # t2 moved to p2 right after t1: the 18 ms transfer is missing
    lat = P.dur[1, 1]
    late = GOOD.makespan + 100
    moved = replace_job("t2", device="p2", start=j1.end, end=j1.end + lat)
    assert rules(moved) == [4]
    ok = replace_job("t2", device="p2", start=late, end=late + lat)
    assert 4 in rules(ok)  # now t2's children start before it ends


def test_rule4_missing_link():
    d = P.to_dict()
    d["links"] = [ln for ln in d["links"] if {ln["a"], ln["b"]} != {"p1", "p2"}]
    q = Problem.from_dict(d)
    j = job("t10")
    far = replace_job("t10", device="p2", start=500, end=500 + P.dur[9, 1])
    far = dataclasses.replace(far, makespan=500 + P.dur[9, 1], throughput=1000 / (500 + P.dur[9, 1]))
    msgs = [str(v) for v in validate(q, far)]
    assert any("no link" in m for m in msgs) and j.device == "p1"


def test_rule5_overlap():
    j2 = job("t2")
    j3 = job("t3")
    s = replace_job("t3", start=j2.start, end=j2.start + (j3.end - j3.start))
    assert rules(s) == [5]


def test_rule6_memory():
    d = P.to_dict()
    d["devices"][0]["memory"] = 100
    for t in d["tasks"]:
        t["weight_bytes"] = 15
    q = Problem.from_dict(d)
    assert rules(GOOD, q) == [6]


def test_rule7_makespan_and_throughput():
    assert rules(dataclasses.replace(GOOD, makespan=100)) == [7]
    assert rules(dataclasses.replace(GOOD, throughput=99.0)) == [7]


def test_a_lower_bound_above_a_valid_schedule_is_refused():
    # validate accepted a bound of 1e6 on this 127 ms schedule: no proof can hold it
    assert validate(P, dataclasses.replace(GOOD, lower_bound=127.0)) == []
    bad = validate(P, dataclasses.replace(GOOD, lower_bound=1e6))
    assert [v.rule for v in bad] == [7] and "bounds nothing" in bad[0].message
    # a solve with relocation costs bounds the makespan plus that cost
    assert validate(P, dataclasses.replace(GOOD, lower_bound=130.0, relocation_cost=5.0)) == []


@pytest.mark.parametrize("edit, message", [
    ({"status": "optimal", "interrupted": True}, "interrupted: a schedule stopped before its end"),
    ({"relocation_cost": -1.0}, "relocation_cost: expected a number of at least 0"),
    ({"solve_seconds": -0.5}, "solve_seconds: expected a number of at least 0"),
])
def test_schedule_fields_that_contradict_the_format_are_refused(edit, message):
    from mapsched import Schedule, ScheduleError

    with pytest.raises(ScheduleError, match=message):
        Schedule.from_dict(GOOD.to_dict() | edit)


def test_every_violation_is_reported():
    j1 = job("t1")
    # t1 starts before 0, lasts too long, overlaps and delays its children; t5 is on no device
    bad = [dataclasses.replace(j1, start=-1, end=200)] + [j for j in GOOD.jobs if j.task not in ("t1", "t5")]
    bad.append(Job("t5", "p9", 0, 1, (0,)))
    got = rules(with_jobs(bad))
    assert got == [1, 2, 3, 4, 5, 7]


@pytest.mark.parametrize("rule,schedule", [
    (1, replace_job("t10", device="p9")),
    (2, replace_job("t10", end=job("t10").end + 1)),
    (3, with_jobs([j for j in GOOD.jobs if j.task != "t5"])),
    (4, replace_job("t2", device="p2", start=job("t1").end, end=job("t1").end + P.dur[1, 1])),
    (5, replace_job("t3", start=job("t2").start, end=job("t2").start + P.dur[2, 0])),
    (7, dataclasses.replace(GOOD, makespan=100)),
])
def test_cli_validate_rejects_each_rule(tmp_path, capsys, rule, schedule):
    path = tmp_path / "s.json"
    schedule.write(str(path))
    assert main(["validate", "builtin:topcuoglu2002", str(path)]) == 1
    assert f"rule {rule}:" in capsys.readouterr().out


def test_cli_validate_rule6_and_accepts_good(tmp_path, capsys):
    good = tmp_path / "good.json"
    GOOD.write(str(good))
    assert main(["validate", "builtin:topcuoglu2002", str(good)]) == 0
    assert capsys.readouterr().out.strip() == "valid"
    d = P.to_dict()
    d["devices"][0]["memory"] = 100
    for t in d["tasks"]:
        t["weight_bytes"] = 15
    prob = tmp_path / "p.json"
    Problem.from_dict(d).write(str(prob))
    assert main(["validate", str(prob), str(good)]) == 1
    assert "rule 6:" in capsys.readouterr().out


def test_malformed_schedule_file(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text('{"format": "mapsched.schedule/1", "makespan": 1, "jobs": [{"task": "t1"}]}')
    assert main(["validate", "builtin:topcuoglu2002", str(path)]) == 2
    assert "jobs[0]: missing field 'device'" in capsys.readouterr().err


@pytest.mark.parametrize("text, field", [("Infinity", "jobs[0].end"), ("-Infinity", "jobs[0].start"), ("NaN", "jobs[0].end")])
def test_schedule_times_must_be_finite(tmp_path, capsys, text, field):
    data = GOOD.to_dict()
    data["jobs"][0]["start" if "start" in field else "end"] = "@"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data).replace('"@"', text))
    out = tmp_path / "chart.png"
    assert main(["validate", "builtin:topcuoglu2002", str(path)]) == 2
    assert f"{field}: expected a finite number, got" in capsys.readouterr().err
    if importlib.util.find_spec("matplotlib"):
        assert main(["plot", str(path), "--problem", "builtin:topcuoglu2002", "-o", str(out)]) == 2
        assert not out.exists()


def test_validate_names_a_wrong_argument():
    # AttributeError: 'NoneType' object has no attribute 'jobs'
    from mapsched import OptionError, instances, solve

    p = instances.load("topcuoglu2002")
    r = solve(p, "heft")
    for args, says in (((p, None), "schedule: expected a mapsched.Schedule, got NoneType"),
                       ((r, p), "problem: expected a mapsched.Problem, got Schedule")):
        with pytest.raises(OptionError, match="^[^\n]*$") as err:
            validate(*args)
        assert says in str(err.value)
