"""What a hostile or careless user can do to the command line: every case ends in one line
on stderr with a non-zero status and no traceback, the inputs unchanged and nothing half-written.

Each group of the reliability run has its own tests, through the CLI as a subprocess; the
interrupt and fuzz tests call ``main`` in-process, where a signal can be timed and each
example costs no start-up.
"""

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mapsched
from mapsched import Problem, Schedule, generators, instances, solve, validate
from mapsched.cli import main
from mapsched.engine import interrupt

BASE = instances.load("topcuoglu2002")


def run(*args, cwd=None, env=None, umask=None):
    """``python -m mapsched ARGS`` as a user runs it; returns (status, stdout, stderr)."""
    pre = (lambda: os.umask(umask)) if umask is not None else None
    proc = subprocess.run([sys.executable, "-m", "mapsched", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, preexec_fn=pre, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def refused(code, err, *words):
    """Exit 2 with one stderr line, no traceback, naming ``words``."""
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mapsched: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def problem_file(tmp_path):
    path = tmp_path / "p.json"
    BASE.write(str(path))
    return path


# ------------------------------------------------------- 1. -o never destroys what is there
def test_output_onto_the_input_is_refused(problem_file, tmp_path):
    before = digest(problem_file)
    refused(*run("solve", problem_file, "-o", problem_file)[::2], "-o", "input", "destroy")
    link = tmp_path / "link.json"
    link.symlink_to(problem_file)
    refused(*run("solve", problem_file, "-o", link)[::2], "input")
    assert digest(problem_file) == before and link.is_symlink()
    schedule = tmp_path / "s.json"
    assert run("solve", problem_file, "-o", schedule)[0] == 0
    refused(*run("plot", schedule, "--problem", problem_file, "-o", problem_file)[::2], "input")
    assert digest(problem_file) == before


def test_output_writes_through_links_and_into_devices(problem_file, tmp_path):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    link.symlink_to(target)  # dangling: the file is made where it points
    assert run("solve", problem_file, "-m", "heft", "-o", link)[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert Schedule.read(str(target)).makespan == 80.0
    code, out, err = run("solve", problem_file, "-o", os.devnull)
    assert code == 0 and err == ""
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # still the device, not a regular file
    out_link = tmp_path / "out.json"
    out_link.symlink_to("/dev/stdout")
    for path in ("/dev/stdout", out_link):  # standard output as the shell gave it, not stderr
        code, out, _ = run("solve", problem_file, "-m", "heft", "-o", path)
        assert code == 0 and json.loads(out[:out.rindex("}") + 1])["makespan"] == 80.0


def test_output_folder_and_missing_folder(problem_file, tmp_path):
    refused(*run("solve", problem_file, "-o", tmp_path)[::2], "-o", "is a folder")
    refused(*run("generate", "random-dag", "-o", tmp_path / "no" / "p.json")[::2], "-o", "no folder")
    refused(*run("solve", problem_file, "-o", f"{tmp_path / 'out'}/")[::2], "-o", "names a folder")  # wrote out
    assert not (tmp_path / "no").exists() and not (tmp_path / "out").exists()


# ------------------------------------------------------------ 2. bound in proportion (see test_time_limits)
# ------------------------------------------------------------------------ 3. deeply nested JSON
@pytest.mark.parametrize("command", [["solve", "{f}"], ["validate", "{f}", "{f}"], ["bound", "{f}"]])
def test_deeply_nested_json(tmp_path, command):
    bomb = tmp_path / "bomb.json"
    bomb.write_text("[" * 100000 + "]" * 100000)
    refused(*run(*[c.format(f=bomb) for c in command])[::2], "nested too deeply")


# -------------------------------------------------------------- 4. numbers out of range
@pytest.mark.parametrize("field,edit", [
    ("devices[0].memory", lambda d: d["devices"][0].update(memory=1e308)),
    ("links[0].latency", lambda d: d["links"][0].update(latency=1e308)),
    ("edges[0].bytes", lambda d: d["edges"][0].update(bytes=1e308)),
])
@pytest.mark.parametrize("command", [["solve", "-m", "exact"], ["solve", "-m", "split"], ["bound"]])
def test_huge_numbers_are_refused_at_load(tmp_path, field, edit, command):
    d = BASE.to_dict()
    edit(d)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    refused(*run(command[0], path, *command[1:])[::2], field, "from 0 to" if "memory" not in field else "up to")


# ------------------------------------------------------ 5. time limits count the start-up
def test_solve_time_limit_counts_the_start_up(tmp_path):
    path = tmp_path / "p.json"
    generators.stack(5, 10, 2).write(str(path))
    code, out, err = run("solve", path, "-m", "sa", "--iterations", "100000000", "--time-limit", "3",
                         "-o", tmp_path / "s.json")
    assert code == 0, err
    # The command's wall time is checked in BENCHMARKS (bench_time_limits.py); here, that the
    # solve got what was left after start-up, not all of it.
    assert Schedule.read(str(tmp_path / "s.json")).solve_seconds < 3.0


# ------------------------------------------------------------------ 6. modes follow the umask
def test_new_files_follow_the_umask_and_old_ones_keep_their_mode(problem_file, tmp_path):
    out = tmp_path / "s.json"
    assert run("solve", problem_file, "-o", out, umask=0o027)[0] == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert run("generate", "random-dag", "--tasks", "5", "-o", tmp_path / "g.json", umask=0o002)[0] == 0
    assert stat.S_IMODE(os.stat(tmp_path / "g.json").st_mode) == 0o664
    os.chmod(out, 0o604)
    assert run("solve", problem_file, "-o", out, umask=0o077)[0] == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o604
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".mapsched-")]  # no temporary file left


def test_outputs_that_go_together_are_written_all_or_none(tmp_path):
    from mapsched.model.files import write_files

    old = tmp_path / "old.json"
    old.write_text("kept")
    for bad in ("/dev/full", tmp_path):  # a failed write, a folder
        with pytest.raises(mapsched.OptionError, match="cannot write|is a folder"):
            write_files([(str(old), "new"), (str(tmp_path / "made.json"), "new"), (str(bad), "new")])
        assert old.read_text() == "kept" and sorted(f.name for f in tmp_path.iterdir()) == ["old.json"]
    write_files([(str(old), "new"), (str(tmp_path / "made.json"), "made")])
    assert old.read_text() == "new" and (tmp_path / "made.json").read_text() == "made"


# ------------------------------------------------------------------------ 7. large charts
def test_large_chart_is_summarised(tmp_path):
    pytest.importorskip("matplotlib")
    from mapsched.plot import MAX_JOBS

    p = generators.random_dag(MAX_JOBS + 500, 4, 0)
    problem, schedule, png = tmp_path / "p.json", tmp_path / "s.json", tmp_path / "g.png"
    p.write(str(problem))
    assert run("solve", problem, "-m", "met", "-o", schedule)[0] == 0
    code, out, err = run("plot", schedule, "--problem", problem, "-o", png)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ 8. interrupts, in-process
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("method,options", [("sa", ["--iterations", "100000000"]), ("split", []), ("exact", [])])
def test_interrupt_writes_the_best_schedule_and_exits_130(tmp_path, capsys, sig, method, options):
    p = generators.stack(10, 10, 4)
    problem, out = tmp_path / "p.json", tmp_path / "s.json"
    p.write(str(problem))
    handler = signal.getsignal(sig)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), sig))
    timer.start()
    try:
        code = main(["solve", str(problem), "-m", method, "--time-limit", "60", "-o", str(out), *options])
    finally:
        timer.cancel()
    err = capsys.readouterr().err
    assert code == 130
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err
    s = Schedule.read(str(out))
    assert s.interrupted and s.status == "feasible" and s.solve_seconds < 30
    assert validate(p, s) == []
    # the handler put back, and the stop ended with the command: a later solve here runs
    # (it used to stay in force, and every solve after it in the process stopped at once)
    assert not interrupt.requested() and signal.getsignal(sig) is handler
    assert solve(BASE, "exact", time_limit=30).status == "optimal"


def test_graceful_from_python_marks_the_result_as_the_command_does():
    # the README's 'with mapsched.engine.interrupt.graceful(): mapsched.solve(...)': its result was
    # neither marked interrupted nor feasible, as the command's file is
    p = generators.stack(10, 10, 4)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with interrupt.graceful():
            s = solve(p, "sa", time_limit=60, iterations=100_000_000)
    finally:
        timer.cancel()
    assert s.interrupted and s.status == "feasible" and s.solve_seconds < 30 and validate(p, s) == []
    assert not solve(BASE, "heft").interrupted  # outside the block, no longer


def test_a_request_from_another_thread_stops_the_running_solves_only():
    # A service cancelling from a worker thread (graceful() needs the main one): the stop
    # stayed in force, and every later solve in the process returned its start at once.
    p = generators.stack(10, 10, 4)
    interrupt.request()  # no solve running: nothing to stop, nothing kept
    assert not interrupt.requested()
    timer = threading.Timer(1.0, interrupt.request)
    timer.start()
    try:
        s = solve(p, "sa", time_limit=60, iterations=100_000_000)
    finally:
        timer.cancel()
    assert s.interrupted and s.status == "feasible" and s.solve_seconds < 30 and validate(p, s) == []
    assert not interrupt.requested()
    again = solve(BASE, "sa", time_limit=2)
    assert not again.interrupted


def test_an_interrupt_cancels_a_highs_relaxation_and_bound_prints_what_it_proved(tmp_path, capsys):
    # HiGHS's MIP held the main thread: 'bound' ignored SIGTERM until it was killed.
    from mapsched.bounds.relaxation import relaxation_bound

    p = generators.stack(20, 10, 2, "sdep", seed=1)  # its MIP runs to any limit under a minute
    timer = threading.Timer(1.0, interrupt.request)
    began = time.perf_counter()
    with interrupt.graceful():
        timer.start()
        value = relaxation_bound(p, time_limit=60)
    assert time.perf_counter() - began < 20 and 0 <= value <= solve(p, "heft").makespan
    problem = tmp_path / "p.json"
    p.write(str(problem))
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        code = main(["bound", str(problem), "--time-limit", "120"])
    finally:
        timer.cancel()
    out, err = capsys.readouterr()
    assert code == 130 and "lower bound" in out
    assert err.count("\n") == 1 and "interrupted; the bound is the best proved before" in err


def _handles(pid, sig):
    """Whether process ``pid`` catches ``sig`` yet (Linux: the SigCgt mask of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as fh:
        mask = next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))
    return bool(mask >> (sig - 1) & 1)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc to see the handler")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_through_the_command_line(tmp_path, sig):
    p = generators.stack(10, 10, 4)
    problem, out = tmp_path / "p.json", tmp_path / "s.json"
    p.write(str(problem))
    proc = subprocess.Popen([sys.executable, "-m", "mapsched", "solve", str(problem), "-m", "split",
                             "--time-limit", "120", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while not _handles(proc.pid, signal.SIGTERM) and time.monotonic() < deadline:  # the solve has begun
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err
    s = Schedule.read(str(out))
    assert s.interrupted and s.status == "feasible" and validate(p, s) == []


# ------------------------------------------------------------------- 9. bad options, one line each
@pytest.mark.parametrize("args,words", [
    (["solve", "{p}", "--seed", "-1"], ["--seed", "at least 0"]),
    (["solve", "{p}", "--time-limit", "nan"], ["--time-limit", "positive number of seconds"]),
    (["solve", "{p}", "--time-limit", "-3"], ["--time-limit"]),
    (["solve", "{p}", "--threads", "-2"], ["--threads"]),
    (["solve", "{p}", "-o", "{d}"], ["-o", "is a folder"]),
    (["plot", "{s}", "--problem", "{p}", "-o", "{d}/nodir/g.png"], ["-o", "no folder"]),
    (["plot", "{s}", "--problem", "{p}", "-o", "{d}/g.txt"], ["-o", "unknown image format 'txt'", "png"]),
    (["plot", "{s}", "--problem", "{p}", "-o", "{p}"], ["-o", "input"]),
    (["generate", "random-dag", "--tasks", "-5", "-o", "{d}/g.json"], ["--tasks", "from 1 to"]),
    (["generate", "stack", "--modules", "3", "--channels", "0", "-o", "{d}/g.json"], ["--channels", "from 1 to"]),
    (["bound", "{p}", "--time-limit", "0"], ["--time-limit"]),
    (["bench", "smoke", "--workers", "-1"], ["--workers"]),
])
def test_bad_options_are_one_line(problem_file, tmp_path, args, words):
    schedule = tmp_path / "s.json"
    Schedule.from_jobs(BASE, []).write(str(schedule))
    if args[0] == "plot":
        pytest.importorskip("matplotlib")
    before = digest(problem_file)
    refused(*run(*[a.format(p=problem_file, s=schedule, d=tmp_path) for a in args])[::2], *words)
    assert digest(problem_file) == before
    assert sorted(os.listdir(tmp_path)) == ["p.json", "s.json"]  # nothing written, not even in part


# ------------------------------------------------------- 10. strings where integers belong
@pytest.mark.parametrize("edit,field", [
    (lambda d: d["devices"][0].update(batch_sizes=["5", 2]), "devices[0].batch_sizes"),
    (lambda d: d.update(objective={"kind": "throughput", "batch": "5"}), "objective.batch"),
])
def test_strings_are_not_integers(tmp_path, edit, field):
    d = BASE.to_dict()
    edit(d)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    refused(*run("validate", path, path)[::2], field, "'5'")


# ------------------------------------------- 11. bench runs no code from the working directory
def test_bench_reads_no_suites_file_unless_named(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "suites.py").write_text(f"open({str(marker)!r}, 'w')\nSUITES = {{}}\n")
    refused(*run("bench", "nope", cwd=tmp_path)[::2], "unknown suite 'nope'", "paper-latency", "smoke")
    assert not marker.exists()
    refused(*run("bench", "nope", "--suites", tmp_path / "benchmarks" / "suites.py", cwd=tmp_path)[::2],
            "unknown suite")
    assert marker.exists()  # named, it is run: the README says so


# ------------------------------------------------------ fuzz: mutated files never crash
TEXT = BASE.to_json()


def _mutate_json(data, draw):
    """Replace one value somewhere in the document by a hostile one."""
    paths = []

    def walk(node, path):
        paths.append(path)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in children:
            walk(v, path + [k])

    walk(data, [])
    path = draw(st.sampled_from(paths[1:]))
    value = draw(st.one_of(
        st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False),
        st.sampled_from([1e308, -1e308, 0, -1, "", "5", "t1", "p1", [], {}, [[[[]]]], {"1": 2}]),
        st.text(max_size=5)))
    node = data
    for k in path[:-1]:
        node = node[k]
    if draw(st.booleans()) and isinstance(node, dict):
        node.pop(path[-1])
    else:
        node[path[-1]] = value
    return data


@st.composite
def hostile_files(draw):
    if draw(st.booleans()):
        raw = bytearray(TEXT.encode())
        for _ in range(draw(st.integers(1, 4))):
            k = draw(st.integers(0, len(raw) - 1))
            raw[k] = draw(st.integers(0, 255))
        return bytes(raw)
    return json.dumps(_mutate_json(json.loads(TEXT), draw)).encode()


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 150)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=hostile_files())
def test_mutated_files_give_a_result_or_one_line(tmp_path, capsys, content):
    path = tmp_path / "p.json"
    path.write_bytes(content)
    out = tmp_path / "s.json"
    for args in (["solve", str(path), "-o", str(out)], ["validate", str(path), str(path)],
                 ["bound", str(path), "--time-limit", "0.5"]):
        if out.exists():
            out.unlink()
        code = main(args)  # any exception other than a user error escapes and fails the test
        err = capsys.readouterr().err
        assert code in (0, 1, 2)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("mapsched: error: ")
            assert not out.exists()
        if code == 0 and args[0] == "solve":
            p = Problem.read(str(path))
            assert validate(p, Schedule.read(str(out))) == []


# ------------------------------------------------------------- the feasibility repair's time
def _tight():
    # 60 tasks of 10 bytes on 3 devices of 210: a construction's greedy choices can dead-end
    from mapsched import Device, System, Task

    tasks = [Task(f"t{i}", {"d0": 1.0 + i % 3, "d1": 2.0, "d2": 3.0 - i % 2}, weight_bytes=10.0) for i in range(60)]
    return Problem(tasks, [], System(tuple(Device(f"d{u}", memory=210.0) for u in range(3))))


def test_the_repair_keeps_within_the_solves_time(monkeypatch):
    # feasible_counts gave CP-SAT 30 s whatever the solve's limit: 31.6 s for heft at a 5 s limit
    from ortools.sat.python import cp_model

    from mapsched.scheduling import feasibility

    given = []

    class Recording(cp_model.CpSolver):
        def solve(self, model, *args):
            given.append(self.parameters.max_time_in_seconds)
            return super().solve(model, *args)

    monkeypatch.setattr(feasibility.cp_model, "CpSolver", Recording)
    p = _tight()
    feasibility.feasible_counts(p)
    with interrupt.until(time.perf_counter() + 4.0):
        feasibility.feasible_counts(p)
    with interrupt.until(time.perf_counter() - 1.0):  # past it: the least it gets
        feasibility.feasible_counts(p)
    assert given[0] == 30.0 and given[1] <= 0.9 * 4.0 and given[2] == feasibility.REPAIR_LEAST


def test_a_repair_out_of_time_fills_the_devices_in_order(monkeypatch):
    # the method refused ('no feasible mapping found within 30 s') where m-TOPO finds one at once
    from mapsched.scheduling import construct, feasibility
    from mapsched.scheduling.ranks import rank_order, upward_rank

    def out_of_time(*args, **kwargs):
        raise feasibility.NotFound("no feasible mapping found within 1 s (memory and links are tight)")

    monkeypatch.setattr(feasibility, "feasible_counts", out_of_time)
    p = _tight()
    s = construct.repair(p, rank_order(p, upward_rank(p)), np.zeros((p.n, p.m), dtype=np.int64), insertion=True)
    assert validate(p, s) == [] and "m-TOPO" in s.log
