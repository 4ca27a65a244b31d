"""The benchmark runner: resumable sweeps, tables, plot, CLI."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from mapsched.bench import BOUND, Case, Suite, plot_quality, read_rows, results_table, run_suite, runtime_table
from mapsched.cli import main
from mapsched.errors import MapschedError
from mapsched.generators import random_wired

SUITE = Suite("tiny", (Case("a", random_wired, {"n": 6, "seed": 1}), Case("b", random_wired, {"n": 6, "seed": 2})),
              ("met", "heft", "exact", "split", BOUND), time_limit=5.0)


def test_run_resume_and_tables(tmp_path):
    out = str(tmp_path / "rows.jsonl")
    with ThreadPoolExecutor(2) as pool:
        rows = run_suite(SUITE, out, executor=pool)
    assert len(rows) == 10 and len(read_rows(out)) == 10
    runs = [r for r in rows if r["method"] != BOUND]
    assert all("makespan" in r and r["lower_bound"] <= r["makespan"] + 1e-9 for r in runs)
    # the full bound (chain recursion) is a row of its own, below every run on its instance
    for b in (r for r in rows if r["method"] == BOUND):
        assert "makespan" not in b and b["rule"]
        assert all(b["lower_bound"] <= r["makespan"] + 1e-9 for r in runs if r["instance"] == b["instance"])
    # a rerun finds every pair done and runs nothing
    calls = []
    run_suite(SUITE, out, executor=ThreadPoolExecutor(1), progress=lambda d, t: calls.append(t))
    assert calls == [0] and len(read_rows(out)) == 10
    table = results_table(rows, SUITE.methods)
    assert table.count("\n| a |") + table.count("\n| b |") == 2 and "**" in table
    assert table.splitlines()[0] == "| instance | met | heft | exact | split | bound |"
    assert "x |" in runtime_table(rows)
    # each latency result scored under the work-conserving model too, above the same bounds
    assert all(r["simulated"] >= r["lower_bound"] - 1e-9 for r in runs)
    wc = results_table(rows, SUITE.methods, "simulated")
    assert "work-conserving" in wc and wc.splitlines()[0] == table.splitlines()[0]
    pytest.importorskip("matplotlib")
    png = tmp_path / "q.png"
    plot_quality(rows, str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_interrupted_sweep_keeps_finished_rows(tmp_path):
    out = tmp_path / "rows.jsonl"
    out.write_text(json.dumps({"instance": "a", "method": "met", "makespan": 1.0, "tasks": 8, "inputs": 1}) + "\n")
    with ThreadPoolExecutor(1) as pool:
        rows = run_suite(SUITE, str(out), executor=pool)
    assert sum(r["instance"] == "a" and r["method"] == "met" for r in rows) == 1  # kept, not rerun
    assert len(rows) == 10


def test_a_row_cut_short_is_redone_and_a_bad_line_refused(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    whole = json.dumps({"instance": "a", "method": "met", "makespan": 1.0, "tasks": 8, "inputs": 1}) + "\n"
    out.write_text(whole + json.dumps({"instance": "a", "method": "heft", "makespan": 2.0})[:25])  # killed mid-write
    assert len(read_rows(str(out))) == 1
    with ThreadPoolExecutor(1) as pool:
        rows = run_suite(SUITE, str(out), executor=pool)
    assert len(rows) == 10 and out.read_text().startswith(whole)
    again = read_rows(str(out))  # every line whole again: the cut row was removed, not appended to
    assert len(again) == 10 and sum(r["instance"] == "a" and r["method"] == "heft" for r in again) == 1
    for bad, detail in (("not json\n", "Expecting value"), ("[1, 2]\n", "expected an object with 'instance'"),
                        ('"a string"\n', "expected an object with 'instance'")):
        out.write_text(bad + whole)
        with pytest.raises(MapschedError, match=f"rows.jsonl, line 1: not a results row \\({detail}"):
            read_rows(str(out))
        assert main(["bench", "smoke", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "line 1" in err and out.read_text() == bad + whole  # nothing written


def test_cli_bench_smoke(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the built-in suites are package data: no file needed here
    assert main(["bench", "smoke", "--workers", "2", "--time-limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "| instance | met | heft | sa | exact | split | bound |" in out and (tmp_path / "smoke.jsonl").exists()
    assert main(["bench", "nope"]) == 2


def test_a_sweep_loads_a_learned_method_outside_its_runs_limit():
    # In a fresh interpreter, as a sweep's worker: the run loads PyTorch first, so a limit too
    # short for the load still gets a learned result, not the placement from before learning.
    pytest.importorskip("torch")
    import subprocess
    import sys

    code = ("import sys\n"
            "from mapsched.bench import Case, _run_one\n"
            "from mapsched.generators import random_wired\n"
            "row = _run_one(Case('a', random_wired, {'n': 6, 'seed': 1}), 'giph', 1.0, {})\n"
            "print('torch._dynamo' in sys.modules, 'makespan' in row, row['seconds'] < 1.5)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


def test_bench_refuses_what_is_not_its_results_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suites = tmp_path / "mine.py"
    suites.write_text("from mapsched.suites import SUITES")  # no newline at its end
    victim = tmp_path / "victim.json"
    victim.write_text('{"my": "data"}')  # read as a row cut short, and truncated
    row = json.dumps({"instance": "a", "method": "met", "makespan": 1.0, "lower_bound": "x"}) + "\n"
    (tmp_path / "bad.jsonl").write_text(row)  # the tables raised TypeError on it
    cases = [
        (["-o", str(victim)], "its last line is neither a results row nor one cut short"),
        (["--suites", str(suites), "-o", str(suites)], "is the input"),
        (["-o", "nodir/rows.jsonl"], "no folder"),  # a traceback, after every run
        (["-o", "bad.jsonl"], "'lower_bound' is 'x', not a finite number"),
    ]
    for argv, message in cases:
        assert main(["bench", "smoke", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert victim.read_text() == '{"my": "data"}' and suites.read_text() == "from mapsched.suites import SUITES"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "mine.py", "victim.json"]


@pytest.mark.parametrize("code, message", [
    ("SUITES = {\n", "running '{}' failed: SyntaxError"),
    ('SUITES = {"smoke": 3}\n', "is not a mapsched.bench.Suite"),
    ('from mapsched.bench import Suite\nSUITES = {"smoke": Suite("e", (), ("heft",), 1.0)}\n', "with cases"),
])
def test_bench_refuses_a_bad_suites_file_in_one_line(tmp_path, capsys, code, message):
    suites = tmp_path / "s.py"
    suites.write_text(code)
    assert main(["bench", "smoke", "--suites", str(suites), "-o", str(tmp_path / "r.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message.format(suites) in err and err.count("\n") == 1 and not (tmp_path / "r.jsonl").exists()
