"""Solving on a dask.distributed LocalCluster of two worker processes (mapsched.distributed)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("distributed")

from mapsched import Objective  # noqa: E402
from mapsched.bench.sweep import Case, Suite, read_rows, run_suite  # noqa: E402
from mapsched.cli import main  # noqa: E402
from mapsched.engine import dask as mdist  # noqa: E402
from mapsched.errors import MapschedError  # noqa: E402
from mapsched.generators import random_wired, stack  # noqa: E402
from mapsched.model.schedule import Schedule  # noqa: E402
from mapsched.model.validate import validate  # noqa: E402
from mapsched.solve import solve  # noqa: E402
from mapsched.split import chain_bound  # noqa: E402
from mapsched.split.windows import window_bound  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with mdist.connect("local:2") as executor:
        yield executor


def _pid_of_busy_worker(client, pids, stop):
    """Poll the scheduler until some worker runs a task; that worker's pid."""
    while not stop.is_set():
        for addr, keys in client.processing().items():
            if keys and addr in pids:
                return pids[addr]
        time.sleep(0.01)
    return None


def test_tasks_get_the_workers_threads_and_shared_objects(cluster):
    def probe(obj, k):
        return obj["x"] + k, mdist.task_threads(99)

    handle = cluster.share({"x": 10})
    got = [f.result() for f in [cluster.submit(probe, handle, k) for k in range(4)]]
    assert [g[0] for g in got] == [10, 11, 12, 13]
    # two single-threaded workers on this host share its cores: never more threads than cores
    assert all(1 <= g[1] <= max(1, (os.cpu_count() or 1) // 2) for g in got)
    assert mdist.task_threads(7) == 7  # off the cluster, the caller's default
    assert cluster.slots == 2 and not cluster.lost


def test_local_workers_run_without_the_profiler_and_fast_ticks(cluster):
    """What connect sets for local:N reaches the worker processes, whose CPU it saves."""
    import dask

    keys = ("distributed.worker.profile.enabled", "distributed.admin.tick.interval",
            "distributed.worker.memory.monitor-interval")
    seen = cluster.client.run(lambda: [dask.config.get(k) for k in keys])
    assert list(seen.values()) == [[False, "1s", "1s"]] * 2


def test_local_workers_leave_ctrl_c_to_the_command():
    # A terminal's Ctrl-C reaches every process of the group: each worker printed 30 lines of
    # traceback while the command stopped the solve and wrote its best schedule.
    import signal

    # As from a terminal: a shell's background job (as CI may run this) starts with SIGINT ignored,
    # which its worker processes would inherit whatever connect does.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with mdist.connect("local:1") as executor:
            seen = executor.client.run(lambda: signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
            assert list(seen.values()) == [True]
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # this process still stops
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("seed", [1, 2])
def test_split_equals_in_process_on_exact_stacks(cluster, seed):
    p = stack(modules=3, n=5, channels=1, seed=seed)
    here = solve(p, "split", workers=1)
    there = solve(p, "split", executor=cluster)
    assert not validate(p, there)
    assert there.makespan == pytest.approx(here.makespan, rel=1e-9)
    assert there.lower_bound == pytest.approx(here.lower_bound, rel=1e-9)
    assert there.status == here.status == "optimal"


class _Counting:
    """An executor passing everything on, counting the tasks and the subproblems sent."""

    def __init__(self, executor):
        self.executor, self.tasks, self.subproblems = executor, 0, 0

    def __getattr__(self, name):  # share, slots, lost
        return getattr(self.executor, name)

    def submit(self, fn, *args):
        self.tasks += 1
        self.subproblems += len(args[1])  # _solve_chunk(shared, keys, ...)
        return self.executor.submit(fn, *args)


def test_split_in_chunks_equals_one_subproblem_a_task(cluster):
    p = stack(modules=6, n=4, channels=1, seed=5)
    here = solve(p, "split", workers=1, module_threads=1)
    sent = {}
    for seconds in (0.0, 1e3):  # one subproblem a task; as many a task as the tail's balance allows
        counting = _Counting(cluster)
        there = solve(p, "split", executor=counting, chunk_seconds=seconds, module_threads=1)
        assert not validate(p, there) and there.jobs == here.jobs and there.log == here.log
        sent[seconds] = counting.tasks, counting.subproblems
    assert sent[0.0][0] == sent[0.0][1] == sent[1e3][1] > sent[1e3][0]


def test_split_valid_on_multichannel_stacks(cluster):
    # a DaskExecutor, or the distributed.Client itself
    for variant, executor in (("sdep", cluster), ("wdep", cluster.client)):
        p = stack(modules=3, n=5, channels=2, variant=variant, seed=3)
        r = solve(p, "split", executor=executor, window=0)  # the independent module solves, on the cluster
        assert not validate(p, r) and r.makespan >= r.lower_bound - 1e-9
        assert "module subproblems solved" in r.log and " 0 module subproblems" not in r.log


def test_window_bound_equals_local(cluster):
    # every window proves far inside its limit, so a loaded machine cannot cut one short: both
    # sides prove the same
    p = stack(modules=3, n=5, channels=2, variant="sdep", seed=1)
    here = window_bound(p, time_limit=60, window_time_limit=20, block=5, threads=2)
    there = window_bound(p, time_limit=60, window_time_limit=20, block=5, executor=cluster)
    assert there == pytest.approx(here, rel=1e-9)


@pytest.mark.parametrize("kwargs", [dict(modules=4, n=5, channels=2, variant="sdep"),
                                    dict(modules=3, n=4, objective=Objective("throughput", 2))])
def test_chain_bound_equals_local(cluster, kwargs):
    p = stack(seed=1, **kwargs)
    assert chain_bound(p, time_limit=60, executor=cluster) == pytest.approx(chain_bound(p, time_limit=60), rel=1e-9)


def test_bench_through_dask_writes_the_same_rows(cluster, tmp_path, monkeypatch):
    suite = Suite("tiny", tuple(Case(f"s{s}", random_wired, {"n": 6, "seed": s}) for s in (1, 2)),
                  ("met", "heft", "exact", "split"), time_limit=10.0)
    here, there = str(tmp_path / "here.jsonl"), str(tmp_path / "there.jsonl")
    run_suite(suite, here, workers=1)
    run_suite(suite, there, cluster)

    def key(rows):
        return sorted((r["instance"], r["method"], round(r["makespan"], 9), r["status"]) for r in rows)

    assert len(read_rows(there)) == 8 and key(read_rows(there)) == key(read_rows(here))
    calls = []  # every row is there: a rerun resumes with nothing left to run
    run_suite(suite, there, cluster, progress=lambda d, t: calls.append(t))
    assert calls == [0] and len(read_rows(there)) == 8
    # the command line, on a cluster of its own
    suites = tmp_path / "suites.py"
    suites.write_text("from mapsched.bench.sweep import Case, Suite\nfrom mapsched.generators import random_wired\n"
                      "SUITES = {'tiny': Suite('tiny', tuple(Case(f's{s}', random_wired, {'n': 6, 'seed': s}) "
                      "for s in (1, 2)), ('met', 'heft', 'exact', 'split'), time_limit=10.0)}\n")
    cli = str(tmp_path / "cli.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "tiny", "--suites", str(suites), "--dask", "local:2", "-o", cli]) == 0
    assert key(read_rows(cli)) == key(read_rows(here))


def _split_killing_a_busy_worker(executor):
    """split through ``executor`` while its first busy worker is killed: the result is the
    one found in this process, valid and optimal, and the cluster is not lost."""
    p = stack(modules=5, n=6, channels=1, seed=4)
    here = solve(p, "split", workers=1)
    client = executor.client
    pids = client.run(os.getpid)
    stop, killed = threading.Event(), []

    def kill():
        pid = _pid_of_busy_worker(client, pids, stop)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        there = solve(p, "split", executor=executor)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was busy to kill"
    assert not validate(p, there) and not executor.lost
    assert there.makespan == pytest.approx(here.makespan, rel=1e-9) and there.status == "optimal"


def test_worker_killed_mid_split_gives_the_same_valid_result(cluster):
    _split_killing_a_busy_worker(cluster)
    cluster.client.wait_for_workers(2, timeout=60)  # the nanny starts a new worker process


def test_the_only_worker_killed_mid_split_gives_the_same_valid_result():
    # the problem was scattered: lost with local:1's only worker, the subproblems were cancelled
    # and split raised CancelledError; now the shared problem is a task the scheduler runs again
    with mdist.connect("local:1") as executor:
        _split_killing_a_busy_worker(executor)


def test_a_closed_client_or_executor_is_refused(cluster):
    from distributed import Client

    client = Client(cluster.client.scheduler.address, timeout=30)
    executor = mdist.DaskExecutor(client)
    client.close()
    p = stack(modules=2, n=4, channels=1, seed=1)
    for given in (client, executor):  # the executor returned the warm start, as if its scheduler were lost
        with pytest.raises(MapschedError, match="^executor: .*(closed|gone)"):
            solve(p, "split", executor=given, time_limit=10)


@pytest.mark.parametrize("address, says", [
    ("tls://127.0.0.1:8786", "tls:// needs certificates"),
    ("foo", "expected tcp://HOST:PORT"),
    ("tcp://host", "expected tcp://HOST:PORT"),
    ("tcp://host:70000", "expected tcp://HOST:PORT"),
    ("local:0", "positive integer"),
    ("local:two", "positive integer"),
])
def test_bad_addresses_fail_in_one_line(address, says, capsys):
    assert main(["bound", "builtin:topcuoglu2002", "--dask", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--dask" in err and says in err


def test_unreachable_scheduler_fails_in_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(mdist, "CONNECT_TIMEOUT", 0.5)
    out = tmp_path / "s.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "split", "--dask", "tcp://127.0.0.1:9", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no scheduler answered at tcp://127.0.0.1:9" in err
    assert not out.exists()
    assert main(["solve", "builtin:topcuoglu2002", "-m", "heft", "--dask", "local:1"]) == 2  # heft runs here
    assert "give -m split" in capsys.readouterr().err


@pytest.mark.parametrize("answer", [b"", b"HTTP/1.0 400 Bad Request\r\n\r\n"])
def test_a_port_where_no_scheduler_listens_fails_in_one_line(answer, tmp_path, capsys, monkeypatch):
    # a silent socket, or a web server, at the port: the client's handshake waited for ever
    import socket

    monkeypatch.setattr(mdist, "CONNECT_TIMEOUT", 0.5)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    taken = []

    def serve():
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                taken.append(conn)
                if answer:
                    conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    out = tmp_path / "s.json"
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    began = time.perf_counter()
    try:
        code = main(["solve", "builtin:topcuoglu2002", "-m", "split", "--dask", address, "-o", str(out)])
    finally:
        server.close()
        for conn in taken:
            conn.close()
    assert code == 2 and time.perf_counter() - began < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no scheduler answered at {address}" in err
    assert not out.exists()


def test_method_options_are_checked_before_the_cluster_starts(monkeypatch, capsys):
    def never(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(mdist, "connect", never)
    for given, says in ((["--window", "abc"], "--window: method 'split' expects int"),
                        (["--executor", "x"], "executor: method 'split' takes a Python object"),
                        # a traceback: int(inf) sizing the tasks
                        (["--chunk-seconds", "1e308"], "--chunk-seconds: expected a number from 0 to"),
                        # ignored without a word
                        (["--workers", "3"], "--workers: the subproblems run on the --dask cluster's")):
        assert main(["solve", "builtin:topcuoglu2002", "-m", "split", "--dask", "local:2", *given]) == 2
        assert says in capsys.readouterr().err
    # the address went unchecked; the workers ignored
    for argv, says in ((["bound", "builtin:topcuoglu2002", "--fast"], "--dask: the --fast bound runs in this"),
                       (["bench", "smoke", "--workers", "4"], "--workers: the runs go to the --dask")):
        assert main([*argv, "--dask", "tcp://127.0.0.1:1"]) == 2
        assert says in capsys.readouterr().err
    # 0.5 s ended after 9.5-10 s: the cluster's start and close alone pass it
    for command in (["solve", "builtin:topcuoglu2002", "-m", "split"], ["bound", "builtin:topcuoglu2002"]):
        assert main([*command, "--dask", "local:2", "--time-limit", "0.5"]) == 2
        assert "--time-limit: 0.5 s is less than starting and closing a local:N" in capsys.readouterr().err


def test_cli_solve_on_a_local_cluster(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "split", "--dask", "local:1", "-o", str(out)]) == 0
    from mapsched.cli import load_problem

    assert not validate(load_problem("builtin:topcuoglu2002"), Schedule.read(str(out)))


@contextlib.contextmanager
def _scheduler_and_workers(tmp_path):
    """A scheduler and two single-threaded workers in processes of their own: their address
    and the scheduler's process, to kill."""
    file = tmp_path / "scheduler.json"
    common = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(file)], **common)
    worker = None
    try:
        for _ in range(300):
            if file.exists() and file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2",
                                   "--nthreads", "1", "--no-dashboard", "--death-timeout", "10"], **common)
        yield address, scheduler
    finally:
        for proc in (scheduler, worker):
            if proc is not None:
                proc.kill()
                proc.wait()


class _KillAfter:
    """An executor passing everything on, that kills ``proc`` once ``n`` tasks are back."""

    def __init__(self, executor, n, proc):
        self.executor, self.n, self.proc, self.back = executor, n, proc, 0

    def __getattr__(self, name):  # share, slots, lost
        return getattr(self.executor, name)

    def submit(self, *args):
        def count(_):
            self.back += 1
            if self.back == self.n:
                self.proc.kill()

        future = self.executor.submit(*args)
        future.add_done_callback(count)
        return future


def test_scheduler_lost_mid_split_returns_the_best_so_far(tmp_path):
    p = stack(modules=6, n=8, channels=1, seed=1)
    with _scheduler_and_workers(tmp_path) as (address, scheduler), mdist.connect(address, timeout=30) as executor:
        r = solve(p, "split", executor=_KillAfter(executor, 4, scheduler))
        assert executor.lost and r.status == "feasible" and not validate(p, r)
        assert "scheduler was lost mid-run" in r.log


def test_scheduler_lost_mid_sweep_keeps_the_finished_rows(tmp_path):
    suite = Suite("tiny", tuple(Case(f"s{s}", random_wired, {"n": 6, "seed": s}) for s in range(6)),
                  ("heft", "exact"), time_limit=10.0)
    out = str(tmp_path / "rows.jsonl")
    lost = pytest.raises(MapschedError, match="scheduler was lost mid-sweep.*rerun the same command to resume")
    with _scheduler_and_workers(tmp_path) as (address, scheduler), mdist.connect(address, timeout=30) as executor, lost:
        run_suite(suite, out, _KillAfter(executor, 3, scheduler))
    rows = read_rows(out)
    assert 3 <= len(rows) < 12 and all("makespan" in r for r in rows)


def test_bound_says_when_its_scheduler_was_lost(tmp_path, monkeypatch, capsys):
    # a scheduler lost mid-bound gave a much weaker bound without a word
    import mapsched.split
    from mapsched.bounds import Bound

    def bound(problem, time_limit, window_time_limit, executor):
        scheduler.kill()
        for _ in range(200):
            if executor.lost:
                break
            time.sleep(0.05)
        return Bound(1.0, "test")

    monkeypatch.setattr(mapsched.split, "full_bound", bound)
    monkeypatch.setattr(mdist, "CONNECT_TIMEOUT", 30.0)
    with _scheduler_and_workers(tmp_path) as (address, scheduler):
        assert main(["bound", "builtin:topcuoglu2002", "--dask", address]) == 0
    captured = capsys.readouterr()
    assert "lower bound 1 ms (test)" in captured.out
    assert captured.err.count("\n") == 1 and "scheduler was lost mid-run" in captured.err


def test_bound_keeps_the_closing_of_a_local_cluster_within_its_limit(monkeypatch, capsys):
    # 'bound --dask local:2 --time-limit 10' ended after 10.5-11 s: the cluster's close, after
    # the bound, was not within the limit
    import mapsched.split
    from mapsched.bounds import Bound

    given = []

    def bound(problem, time_limit, window_time_limit, executor):
        given.append(time_limit)
        return Bound(1.0, "test")

    monkeypatch.setattr(mapsched.split, "full_bound", bound)
    assert main(["bound", "builtin:topcuoglu2002", "--dask", "local:1", "--time-limit", "30"]) == 0
    assert "lower bound 1 ms (test)" in capsys.readouterr().out
    assert 0 < given[0] <= 30 - mdist.LOCAL_CLOSE
