"""Solving on a dask.distributed cluster: ``--dask ADDRESS`` and :class:`DaskExecutor`.

What runs there: ``split``'s module subproblems, the exact solves of the module-chain
and window bounds, and every (instance, method) run of a benchmark sweep. Each goes through a
:class:`DaskExecutor`, a ``concurrent.futures.Executor`` over a ``distributed.Client``
that the code of those methods takes like any other executor, plus three things a plain
executor lacks:

* :meth:`DaskExecutor.share` sends an object (the problem) to the cluster once, and each
  worker fetches it once; what is submitted then names it, and the subproblems are built
  on the workers;
* each task's solver threads come from the worker it lands on (:func:`task_threads`):
  the cores of the worker's host shared among the task slots of all the workers there;
* :attr:`DaskExecutor.lost` says when the scheduler went away mid-run, so that a
  method keeps what it has instead of failing.

Faults. A worker lost mid-task: the scheduler runs its tasks again elsewhere (up to
``distributed.scheduler.allowed-failures`` times), and a shared object lost with it (the
only worker of ``local:1``, say) is sent again, so the result is the one a run without the
loss gives. A scheduler that cannot be reached at the start: :func:`connect` fails in one
line within its timeout. A
scheduler lost mid-run: ``lost`` turns true as soon as the client loses its connection,
and callers return the best they have without waiting on results in flight
(:func:`completed`).

``distributed`` is an optional dependency (``pip install 'mapsched[dask]'``), imported
only by :func:`connect` and :class:`DaskExecutor`. Workers need ``mapsched`` importable,
at the same version.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any

from mapsched.errors import MapschedError, OptionError, shown

__all__ = ["LOCAL_CLOSE", "LOCAL_LEAST", "LOCAL_PER_CORE", "DaskExecutor", "as_executor", "completed", "connect",
           "local_most", "parse_address", "task_threads"]

CONNECT_TIMEOUT = 5.0
"""Seconds to reach a scheduler at the start (and to reconnect to one lost mid-run)."""
LOCAL_CLOSE = 1.5
"""Seconds kept for closing a ``local:N`` cluster within a command's time limit: closing its
worker processes takes the better part of a second, more on a busy machine."""

LOCAL_LEAST = 5.0
"""The shortest time limit a command takes with ``local:N``: starting and closing the
cluster's processes take seconds, so a shorter limit could not be kept."""

LOCAL_PER_CORE = 4
"""``local:N`` starts at most this many worker processes per core of the machine
(:func:`local_most`): a million would fork until the machine stops."""

_ADDRESS = re.compile(r"tcp://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")
_local = threading.local()  # a worker may run several tasks at once, each in its own thread


def parse_address(text: str) -> str | int:
    """The scheduler address of ``tcp://host:port``, or N of ``local:N``. (``tls://`` needs
    certificates, which a command line does not give: pass a ``distributed.Client`` in Python.)

    >>> parse_address("tcp://10.0.0.5:8786"), parse_address("local:2")
    ('tcp://10.0.0.5:8786', 2)
    """
    head, sep, count = text.partition(":")
    if head == "local" and sep:
        if not (count.isascii() and count.isdigit() and count.strip("0")):
            raise OptionError(f"--dask: local:N needs N, the worker processes, as a positive integer; "
                              f"got {shown(text)}")
        most = local_most()
        if len(count.lstrip("0")) > 12 or int(count) > most:
            raise OptionError(f"--dask: local:N starts N worker processes, at most {most} (4 per core here); "
                              f"got {shown(count)}")
        return int(count)
    if text.startswith("tls://"):
        raise OptionError(f"--dask: tls:// needs certificates the command line does not take; give tcp://HOST:PORT, "
                          f"or in Python pass a distributed.Client made with its security settings; got {shown(text)}")
    m = _ADDRESS.fullmatch(text)
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        raise OptionError(f"--dask: expected tcp://HOST:PORT of a running scheduler or local:N, got {shown(text)}")
    return text


def completed(futures: Iterable[Future], timeout: float | None = None, executor: Executor | None = None,
              poll: float = 0.2) -> Iterator[Future]:
    """The futures as they finish, until all have, ``timeout`` seconds have passed, or the
    executor's cluster is lost (its ``lost`` attribute; checked every ``poll`` seconds).
    With a cluster gone, a future whose result was on its way may never finish: this
    keeps the finished ones without waiting on it."""
    pending = set(futures)
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        left = poll if deadline is None else min(poll, deadline - time.monotonic())
        if left <= 0:
            return
        done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
        yield from done
        if pending and getattr(executor, "lost", False):
            return


def bound_result(future: Future, executor: Executor | None, timeout: float | None = None) -> float:
    """The proved bound a ``future`` computes, or 0 (a bound too, proving nothing) when it
    does not come back within ``timeout`` seconds or the executor's cluster is lost; any
    other error is raised."""
    if next(completed([future], timeout, executor), None) is None:
        future.cancel()
        return 0.0
    try:
        return future.result()
    except Exception:
        if getattr(executor, "lost", False):
            return 0.0
        raise


def as_executor(executor: Any) -> Executor | None:
    """A :class:`DaskExecutor` on a ``distributed.Client``; an executor (anything with a
    ``submit`` method that returns futures), or None, as it is. What the ``executor``
    arguments of split, the bounds and the sweeps go through.

    Raises :class:`~mapsched.errors.OptionError` for anything else, and for an executor
    already shut down or a client already closed: either would fail at its first task.
    """
    if executor is None:
        return None
    # A Client exists only where distributed was imported: importing it here would cost every
    # other executor seconds of a solve's time limit.
    Client = getattr(sys.modules.get("distributed"), "Client", None)
    if Client is not None and isinstance(executor, Client):
        if executor.status != "running":
            raise OptionError(f"executor: the distributed.Client is {executor.status}; pass a connected one")
        return DaskExecutor(executor)
    if not isinstance(executor, type) and callable(getattr(executor, "submit", None)):
        # The standard pools' own flags (ProcessPoolExecutor's under another name): a pool shut
        # down raises only when a task is submitted, deep inside the method.
        if getattr(executor, "_shutdown", False) is True or getattr(executor, "_shutdown_thread", False) is True:
            raise OptionError("executor: it is shut down; pass one that is open")
        if isinstance(executor, DaskExecutor) and executor.lost:
            raise OptionError("executor: its Dask client is closed or its scheduler gone; connect again")
        return executor
    if isinstance(executor, type):
        got = f"the class {executor.__name__}; pass an instance"
    elif isinstance(executor, str):
        got = f"{shown(executor)}; for a scheduler's address use mapsched.engine.dask.connect(ADDRESS)"
    else:
        got = f"a {type(executor).__name__}"
    raise OptionError(f"executor: expected a concurrent.futures.Executor or a distributed.Client, got {got}")


def task_threads(default: int = 1) -> int:
    """Solver threads for the task running in this thread: the worker's share when it runs
    through a :class:`DaskExecutor`, else ``default``."""
    return getattr(_local, "threads", None) or default


def local_most() -> int:
    """The most worker processes ``local:N`` starts: :data:`LOCAL_PER_CORE` per core this process may use."""
    return LOCAL_PER_CORE * _cores()


def _cores() -> int:
    """Cores this process may use (on a worker: that worker's host)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _identity(obj: Any) -> Any:
    return obj


def _on_worker(fn: Callable[..., Any], shares: dict[str, int], args: tuple, kwargs: dict) -> Any:
    """Run ``fn`` on a worker, with :func:`task_threads` set to that worker's share of its host."""
    from distributed import get_worker

    worker = get_worker()
    share = shares.get(worker.address) or max(1, _cores() // max(1, worker.state.nthreads))
    _local.threads = share
    try:
        return fn(*args, **kwargs)
    finally:
        _local.threads = None


class DaskExecutor(Executor):
    """A ``concurrent.futures.Executor`` whose tasks run on a dask.distributed cluster.

    Parameters
    ----------
    client : distributed.Client
        Connected to the scheduler.
    retries : int
        Times a task that raised is run again (a worker lost mid-task is handled by the
        scheduler whatever this is).

    Notes
    -----
    Tasks are submitted impure (each runs, even with equal arguments). Per task, the
    overhead is one round trip to the scheduler and a worker (a few milliseconds on one
    host; ``benchmarks/bench_dask.py`` measures it): ``split`` sends its short
    subproblems several to a task (its ``chunk_seconds``).
    """

    def __init__(self, client: Any, retries: int = 2) -> None:
        self.client = client
        self._inner = client.get_executor(pure=False, retries=retries)
        self._shares = self._worker_shares()
        self._lost = False
        self._shared: list[Any] = []

    def _worker_shares(self) -> dict[str, int]:
        """Per worker, its host's cores over the task slots of every worker on that host."""
        from distributed.comm import get_address_host

        nthreads = self.client.nthreads()
        cores = self.client.run(_cores)
        host = {a: get_address_host(a) for a in nthreads}
        slots: dict[str, int] = {}
        for a, n in nthreads.items():
            slots[host[a]] = slots.get(host[a], 0) + n
        return {a: max(1, cores.get(a, 1) // max(1, slots[host[a]])) for a in nthreads}

    @property
    def slots(self) -> int:
        """Tasks the cluster runs at once: the workers' threads, summed (at least 1)."""
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # the scheduler is gone: one slot is what can be counted on
            return 1

    @property
    def lost(self) -> bool:
        """Whether the connection to the scheduler was lost."""
        self._lost = self._lost or self.client.status != "running"  # reconnecting counts: tasks are failing
        return self._lost

    def share(self, obj: Any) -> Any:
        """``obj`` for the tasks: a handle to pass to :meth:`submit` in its place.

        It goes to the scheduler once, as a task of its own that returns it, and each worker
        fetches it once, from a worker that has it. Scattered data would be lost for good
        with the last worker holding it (``local:1``'s only worker, restarted by its nanny):
        a task's result the scheduler computes again.
        """
        import dask

        # The problem is the task's argument: a large one is meant, not a graph built wrong.
        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 PiB"}):
            handle = self.client.submit(_identity, obj, pure=False)
        self._shared.append(handle)  # held until shutdown; freeing a handle frees the data
        return handle

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn(*args, **kwargs)`` on a worker; handles from :meth:`share` among the
        arguments arrive as their objects."""
        return self._inner.submit(_on_worker, fn, self._shares, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self.lost:
            self._inner._shutdown = True  # no scheduler to wait for or cancel with
        else:
            self._inner.shutdown(wait=wait and not cancel_futures)
        self._shared.clear()


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """These loggers silent (but for critical messages) within the block."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _client(address: str, timeout: float) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a one-line error within
    about ``timeout`` seconds. Its own timeout leaves out the handshake, which waits for ever
    on a port where something else listens (a web server, a silent socket): the client is
    made in a thread of its own, and left there if it does not come back in time."""
    from distributed import Client

    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = Client(address, timeout=timeout)
        except Exception as exc:  # reported below, in the caller's thread
            made["error"] = exc

    thread = threading.Thread(target=make, name="mapsched-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)  # the client's own timeout first, where it applies
    if "client" in made:
        return made["client"]
    why = type(made["error"]).__name__ if "error" in made else "no Dask handshake"
    raise MapschedError(f"--dask: no scheduler answered at {address} within {timeout:g} s ({why}); "
                        "start one with 'dask scheduler', or use local:N")


def dask_setup(worker: Any) -> None:
    """Run in each worker process of a ``local:N`` cluster (Dask's preload): ignore SIGINT,
    which a terminal's Ctrl-C sends to the whole process group; the command that started
    the cluster stops the work and closes its workers itself."""
    import signal

    with contextlib.suppress(ValueError):  # not the main thread: nothing to change
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def connect(address: str, timeout: float | None = None) -> Iterator[DaskExecutor]:
    """A :class:`DaskExecutor` on the scheduler at ``address``, or on a LocalCluster of N
    single-threaded worker processes for ``local:N``; closed on exit.

    Raises :class:`~mapsched.errors.OptionError` for a malformed address and
    :class:`~mapsched.errors.MapschedError` for a scheduler not reached within ``timeout``
    seconds (default :data:`CONNECT_TIMEOUT`), or a missing ``distributed``: one line each,
    before anything runs.
    """
    target = parse_address(address)
    timeout = timeout or CONNECT_TIMEOUT
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MapschedError("--dask: needs dask.distributed; pip install 'mapsched[dask]'") from None
    import dask

    with contextlib.ExitStack() as stack:
        # The client logs every failed try to reach a scheduler, and the gathers a lost one
        # cut off, with tracebacks: the one line of the callers says it all.
        stack.enter_context(_quiet("distributed", "distributed.client", "tornado.application"))
        stack.enter_context(dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}))
        if isinstance(target, int):
            # CPU the workers' cores lose to Dask's own monitoring (benchmarks/bench_dask.py):
            # the workers' statistical profiler samples the task threads every 10 ms, about a
            # tenth of the solves' CPU time, and nobody reads its profiles here; every server
            # checks its event loop every 20 ms and each nanny its worker's memory every
            # 100 ms: a tenth of a core for an idle cluster, which the solves would lose.
            stack.enter_context(dask.config.set({"distributed.worker.profile.enabled": False,
                                                 "distributed.admin.tick.interval": "1s",
                                                 "distributed.worker.memory.monitor-interval": "1s"}))
            # Ctrl-C reaches the whole process group: each worker process printed a traceback of
            # 30 lines while this process stopped the solve and closed the cluster (dask_setup).
            stack.enter_context(dask.config.set({"distributed.worker.preload": [__name__]}))
            # No dashboard; the scheduler's health endpoints on a free port, not 8787 (often taken).
            # Workers log a heartbeat cut off by the cluster's own close as an ERROR with a
            # traceback (seen once in about 20 closes): what fails reaches the caller through
            # the futures, so only CRITICAL records get out.
            cluster = stack.enter_context(LocalCluster(
                n_workers=target, threads_per_worker=1, processes=True, dashboard_address=None,
                scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"}, silence_logs=logging.CRITICAL))
            client = stack.enter_context(Client(cluster, timeout=timeout))
        else:
            client = _client(target, timeout)
            stack.enter_context(client)
            try:
                client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise MapschedError(f"--dask: the scheduler at {target} has no workers; start some with "
                                    f"'dask worker {target}'") from None
        try:
            executor = DaskExecutor(client)
        except Exception as exc:
            if client.status != "running":
                raise MapschedError(f"--dask: the scheduler at {address} was lost while connecting; "
                                    "start it again, or use local:N") from None
            # raised on a worker: most often, no mapsched there
            raise MapschedError(f"--dask: the workers at {address} failed a first task ({exc}); "
                                "install mapsched, this version, where they run") from None
        try:
            yield executor
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
