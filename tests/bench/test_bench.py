"""The benchmark runner: resumable sweeps, tables, plot, CLI."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mapsched.bench.sweep import (
    BOUND,
    Case,
    Suite,
    plot_quality,
    read_rows,
    results_table,
    run_suite,
    runtime_table,
)
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
            "from mapsched.bench.sweep import Case, _run_one\n"
            "from mapsched.generators import random_wired\n"
            "row = _run_one(Case('a', random_wired, {'n': 6, 'seed': 1}), 'giph', 1.0, {})\n"
            "print('torch._dynamo' in sys.modules, 'makespan' in row, row['seconds'] < 1.5)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


def test_bench_refuses_what_is_not_its_results_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suites = tmp_path / "mine.py"
    suites.write_text("from mapsched.bench.suites import SUITES")  # no newline at its end
    victim = tmp_path / "victim.json"
    victim.write_text('{"my": "data"}')  # read as a row cut short, and truncated
    row = json.dumps({"instance": "a", "method": "met", "tasks": 8, "inputs": 1, "makespan": 1.0,
                      "lower_bound": "x"}) + "\n"
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
    assert victim.read_text() == '{"my": "data"}' and suites.read_text() == "from mapsched.bench.suites import SUITES"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "mine.py", "victim.json"]


_SUITE_HEAD = ("from mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import random_dag\n"
               'SUITES = {"smoke": Suite("s", ')


@pytest.mark.parametrize("code, message", [
    ("SUITES = {\n", "running '{}' failed: SyntaxError"),
    ('SUITES = {"smoke": 3}\n', "is not a mapsched.bench.sweep.Suite"),
    ('from mapsched.bench.sweep import Suite\nSUITES = {"smoke": Suite("e", (), ("heft",), 1.0)}\n',
     "cases: expected a non-empty tuple"),
    # each failed in the workers, after the results file was made, naming flags not given, or gave a traceback
    (_SUITE_HEAD + '(Case("c", random_dag, {"n": 3, "m": 2}),), ("heft",), -1.0)}\n',
     "suite 's': time_limit: expected a positive number of seconds, got -1.0"),
    (_SUITE_HEAD + '(Case("c", random_dag, {"nn": 3}),), ("heft",), 1.0)}\n',
     "case 'c': random_dag() takes no keyword 'nn'; it takes n, "),
    (_SUITE_HEAD + '(Case("c", random_dag, {"n": 3}), Case("c", random_dag, {"n": 5})), ("heft",), 1.0)}\n',
     "cases[1]: a second case named 'c'"),
    (_SUITE_HEAD + '(Case("c", random_dag, {"n": 3}),), ("sa",), 1.0, options={"sa": {"bogus": 1}})}\n',
     "--bogus: method 'sa' has no such option"),
    (_SUITE_HEAD + '(Case("c", random_dag, {"n": 3}),), ("nosuchmethod",), 1.0)}\n',
     "none of SUITES['smoke']'s methods ['nosuchmethod']"),
])
def test_bench_refuses_a_bad_suites_file_in_one_line(tmp_path, capsys, code, message):
    suites = tmp_path / "s.py"
    suites.write_text(code)
    assert main(["bench", "smoke", "--suites", str(suites), "-o", str(tmp_path / "r.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message.format(suites) in err and err.count("\n") == 1 and not (tmp_path / "r.jsonl").exists()


def test_a_suites_files_own_builders_reach_the_worker_processes(tmp_path, capsys):
    # the natural suites file: a pool of 4+ runs hung for ever, fewer gave a PicklingError traceback
    suites = tmp_path / "mine.py"
    suites.write_text("from mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import random_dag\n\n"
                      "def mine(n):\n    return random_dag(n, 2, seed=1)\n\n"
                      'SUITES = {"mine": Suite("mine", (Case("c", mine, {"n": 4}),), ("heft", "met", "greedy", '
                      '"random"), time_limit=1.0)}\n')
    out = tmp_path / "r.jsonl"
    assert main(["bench", "mine", "--suites", str(suites), "--workers", "2", "-o", str(out)]) == 0
    rows = read_rows(str(out))
    assert sorted(r["method"] for r in rows) == ["greedy", "heft", "met", "random"]
    assert all(r["tasks"] == 4 and r["makespan"] > 0 for r in rows)
    capsys.readouterr()
    # one a process cannot be sent: refused before any run, not a hang
    lam = Suite("lam", (Case("l", lambda: random_wired(4, seed=0)),), ("heft",), time_limit=1.0)
    with pytest.raises(MapschedError, match="case 'l': cannot be sent to worker processes") as err:
        run_suite(lam, str(tmp_path / "l.jsonl"))
    assert "\n" not in str(err.value) and not (tmp_path / "l.jsonl").exists()


def test_zero_time_problems_and_rows_the_tables_cannot_read(tmp_path, capsys):
    from mapsched import Objective, Problem, solve
    from mapsched.bounds import slr

    z = Problem.from_arrays([[0.0, 0.0]] * 3, [(0, 1), (1, 2)])
    assert slr(z, solve(z, "heft")) == 1.0 and slr(z, 2.0) == float("inf")  # ZeroDivisionError
    zero = Suite("z", (Case("z", Problem.from_arrays, {"latency": [[0.0, 0.0]] * 3, "edges": [(0, 1)]}),),
                 ("met", "heft"), time_limit=1.0)
    with ThreadPoolExecutor(1) as pool:
        rows = run_suite(zero, str(tmp_path / "z.jsonl"), executor=pool)
    assert all(r["makespan"] == 0 and "slr" not in r for r in rows)
    tp = Suite("t", (Case("t", Problem.from_arrays, {"latency": [[0.0, 0.0]], "edges": [],
                                                     "objective": Objective("throughput", 2)}),),
               ("bmet",), time_limit=1.0)
    with ThreadPoolExecutor(1) as pool:
        rows = run_suite(tp, str(tmp_path / "t.jsonl"), executor=pool)
    assert results_table(rows, ("bmet",), "throughput").splitlines()[2] == "| t | inf | inf |"
    assert "| - |" in runtime_table([{"instance": "a", "method": "exact", "seconds": 1.0},
                                     {"instance": "a", "method": "split", "seconds": 0.0}])
    out = tmp_path / "bad.jsonl"
    row = {"instance": "er10-seed0", "method": "met", "tasks": 10, "inputs": 1, "makespan": 1.0}
    for bad, says in (({"history": "oops"}, "'history' is not a list"), ({"history": [[0.1]]}, "'history'"),
                      ({"inputs": None}, "'inputs' is missing")):
        out.write_text(json.dumps(row | bad) + "\n")
        assert main(["bench", "smoke", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1
    # a resumed sweep at another time limit would mix its rows with the file's
    out.write_text(json.dumps(row | {"time_limit": 1.0}) + "\n")
    assert main(["bench", "smoke", "--time-limit", "0.5", "-o", str(out)]) == 2
    assert "ran with a time limit of 1 s, not 0.5 s" in capsys.readouterr().err


def test_bench_output_paths(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "smoke", "-o", ""]) == 2  # wrote smoke.jsonl
    assert "-o: expected a file path" in capsys.readouterr().err and not list(tmp_path.iterdir())
    suites = tmp_path / "s.py"
    suites.write_text('from mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import random_dag\n'
                      'SUITES = {"s": Suite("s", (Case("c", random_dag, {"n": 3}),), ("met",), 1.0)}\n')
    assert main(["bench", "s", "--suites", str(suites), "-o", os.devnull]) == 0  # wrote /dev/null-quality.png
    assert "no plot beside /dev/null" in capsys.readouterr().out
    assert not os.path.exists(os.devnull + "-quality.png")


def test_another_suites_rows_are_kept_but_neither_resumed_nor_shown(tmp_path):
    # A file holding suite smoke's run of instance a was taken for this suite's run of a,
    # another graph: its numbers were shown as this suite's and the run never made.
    out = tmp_path / "rows.jsonl"
    theirs = {"instance": "a", "method": "met", "makespan": 1e-3, "tasks": 99, "inputs": 1, "suite": "other"}
    out.write_text(json.dumps(theirs) + "\n")
    one = Suite("tiny", SUITE.cases, ("met",), 5.0)
    with ThreadPoolExecutor(1) as pool:
        rows = sorted(run_suite(one, str(out), executor=pool), key=lambda r: r["instance"])  # in the order they end
    assert [(r["instance"], r["suite"]) for r in rows] == [("a", "tiny"), ("b", "tiny")]
    assert rows[0]["makespan"] > 1e-3 and rows[0]["tasks"] != 99
    assert read_rows(str(out))[0] == theirs and len(read_rows(str(out))) == 3


_S_SUITES = ('from mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import random_dag\n'
             'SUITES = {"s": Suite("s", (Case("c", random_dag, {"n": 3}),), ("met", "heft"), 1.0)}\n')


def test_rows_to_standard_output_a_pipe_or_a_full_device(tmp_path):
    # A pipe was read for rows to resume from (a hang), /dev/full read until memory ran out,
    # and /dev/stdout's rows went to stderr with a plot written into /dev.
    suites = tmp_path / "s.py"
    suites.write_text(_S_SUITES)
    bench = [sys.executable, "-m", "mapsched", "bench", "s", "--suites", str(suites), "-o"]
    done = subprocess.run([*bench, "/dev/stdout"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-300:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"instance"')]
    assert sorted(r["method"] for r in rows) == ["heft", "met"] and '"instance"' not in done.stderr
    assert "no plot beside /dev/stdout" in done.stdout
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held open: the rows wait in the pipe
    try:
        done = subprocess.run([*bench, str(fifo)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-300:]
        assert os.read(reader, 1 << 16).count(b'"instance"') == 2
    finally:
        os.close(reader)
    done = subprocess.run([*bench, "/dev/full"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == "mapsched: error: /dev/full: cannot write: No space left on device\n"
    assert sorted(os.listdir(tmp_path)) == ["rows.fifo", "s.py"]


def test_sigterm_stops_a_sweep_and_its_workers(tmp_path):
    # the main process died at once (status -15), and its pool's workers ran on
    suites, flag = tmp_path / "slow.py", tmp_path / "started"
    suites.write_text("import time\nfrom mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import "
                      f"random_dag\n\ndef slow():\n    open({str(flag)!r}, 'w').close()\n    time.sleep(120)\n"
                      'SUITES = {"slow": Suite("slow", (Case("b", random_dag, {"n": 3}), Case("a", slow)), '
                      '("met",), 1.0)}\n')
    code = ("import sys\nfrom mapsched.cli import run\n"
            f"sys.argv = ['mapsched', 'bench', 'slow', '--suites', {str(suites)!r}, '--workers', '1', "
            f"'-o', {str(tmp_path / 'r.jsonl')!r}]\nrun()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:  # the worker is in the slow build
            time.sleep(0.1)
        assert flag.exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130 and "mapsched: interrupted" in proc.stderr.read()
        deadline = time.monotonic() + 30
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _group_alive(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_run_suite_checks_its_arguments_before_any_run(tmp_path):
    for kwargs, says in (({"out": str(tmp_path / "no" / "r.jsonl")}, "out: no folder"),  # FileNotFoundError
                         ({"workers": -1}, "workers: expected an integer of at least 0"),  # max_workers
                         ({"threads": 1.5}, "threads: expected an integer")):
        with pytest.raises(MapschedError, match="^[^\n]*$") as err:
            run_suite(SUITE, **{"out": str(tmp_path / "r.jsonl"), **kwargs})
        assert says in str(err.value)
    bad = Suite("bad", SUITE.cases, ("heft", "nosuchmethod"), time_limit=1.0)
    with pytest.raises(MapschedError, match="unknown method 'nosuchmethod'"):
        run_suite(bad, str(tmp_path / "r.jsonl"))
    assert not list(tmp_path.iterdir())
