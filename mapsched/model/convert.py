"""Problems from other tools' graph files: DOPPLER's (``mapsched convert FILE --from doppler``).

DOPPLER's public code (GitHub ``xinyuyao/Doppler``, ``compute_graph/*.txt``) describes a
sharded dataflow graph in a text file:

- line 1: the number of nodes, graph inputs included;
- line 2: the ids of the graph inputs, which are dropped (their data is on every device),
  leaving ``n`` = line 1 minus their count ops, numbered 0 .. n-1;
- line 3: the sources of the edges, line 4 their targets, in the same order;
- then one line per op, ``comp,comm``: its compute cost and the cost of sending its output
  to another device (integers; the ``gdp_`` files add an op type word, ignored here).

Numbers are read as DOPPLER reads them: every run of digits on a line (so ``0, 1, 2,``
and ``0 1 2`` alike). Its simulator takes ``comp / 1e10`` as an op's time on any device
and ``comm / 1e10`` as the time to send the op's output to another device, whichever
the pair (0 on the same device), with transfers taking no resource. The problem keeps
that: every task takes ``comp / 1e10`` on each of ``devices`` identical GPUs with
unbounded memory, every edge carries ``comm`` bytes of its source, and every pair of
GPUs is linked at 1e13 bytes/s with no latency, so a transfer takes ``comm / 1e10``.
Times are thus in DOPPLER's simulator units, written where mapsched writes ms (its
1-GPU ChainMM is 4800.1, against 439.9 ms measured in the paper). An edge listed twice
is kept once (both copies would travel together).

Examples
--------
>>> p = doppler_problem("3\\n0,\\n0,\\n1,\\n20000000000,80000000000\\n10000000000,40000000000\\n", 2)
>>> p.task_names, p.dur[:, 0].tolist(), p.device_comm(p.nbytes[0], 0, 1)
(('v0', 'v1'), [2.0, 1.0], 8.0)
"""

from __future__ import annotations

import re

from mapsched.errors import ProblemError, shown
from mapsched.model.jsonio import read_text
from mapsched.model.problem import MAX_BYTES, MAX_DEVICES, MAX_MS, Device, Edge, Link, Problem, System, Task

__all__ = ["DOPPLER_BANDWIDTH", "DOPPLER_UNIT", "doppler_problem", "read_doppler"]

DOPPLER_UNIT = 1e10
"""DOPPLER's simulator divides costs by this: a task of ``comp`` takes ``comp / 1e10``."""
DOPPLER_BANDWIDTH = 1000 * DOPPLER_UNIT
"""Bytes per second of every link, so that ``comm`` bytes take ``comm / 1e10`` (ms units)."""

_INT = re.compile(r"[0-9]+")
_DIGITS = 30  # more than any count, id or in-range cost has (comp up to 1e22); int() stops at 4,300


def _ints(line: str, where: str) -> list[int]:
    """The runs of digits of ``line`` as integers, one too long for any value refused."""
    runs = _INT.findall(line)
    for run in runs:
        if len(run) > _DIGITS:
            raise ProblemError(f"{where}: a number of {len(run)} digits; DOPPLER's counts, ids and costs have at "
                               f"most {_DIGITS}")
    return [int(run) for run in runs]


def doppler_problem(text: str, devices: int, name: str = "doppler", source: str = "doppler file") -> Problem:
    """The problem of a DOPPLER graph file's text on ``devices`` identical GPUs (module docstring).

    Raises
    ------
    ProblemError
        In one line naming the file, the line and what it expects.

    Notes
    -----
    O(n + E) for n ops and E edges.
    """
    source = shown(source, quote=False)  # a path, as messages quote it
    if not 1 <= devices <= MAX_DEVICES:
        raise ProblemError(f"--devices: expected 1 to {MAX_DEVICES}, got {devices}")
    lines = text.splitlines()
    if len(lines) < 4:
        raise ProblemError(f"{source}: {len(lines)} lines; a DOPPLER graph has a node count, the input ids, "
                           "the edge sources and the edge targets, then one line per op")
    total = _INT.fullmatch(lines[0].strip())
    if total is None:
        raise ProblemError(f"{source} line 1: expected the number of nodes, got {shown(lines[0].strip()[:40])}")
    inputs, src, dst = (_ints(line, f"{source} line {k}") for k, line in enumerate(lines[1:4], 2))
    n = _ints(total.group(), f"{source} line 1")[0] - len(inputs)
    if n < 1:
        raise ProblemError(f"{source} line 1: {total.group()} nodes, {len(inputs)} of them inputs (line 2): "
                           "no op is left")
    if len(src) != len(dst):
        raise ProblemError(f"{source} line 4: {len(dst)} edge targets for {len(src)} sources (line 3); "
                           "give one target per source")
    for k, (a, b) in enumerate(zip(src, dst)):
        if a >= n or b >= n:
            raise ProblemError(f"{source} lines 3-4: edge {k} ({a} -> {b}) names an op outside 0..{n - 1}")
    ops = lines[4:4 + n]
    if len(ops) < n:
        raise ProblemError(f"{source}: {len(ops)} op lines after line 4, expected {n} (one 'comp,comm' per op)")
    names = [f"v{i}" for i in range(n)]
    gpus = tuple(f"gpu{u}" for u in range(devices))
    tasks, comm = [], []
    for i, line in enumerate(ops):
        nums = _ints(line, f"{source} line {5 + i}")
        if len(nums) < 2:
            raise ProblemError(f"{source} line {5 + i}: expected 'comp,comm' for op {i}, got "
                               f"{shown(line.strip()[:40])}")
        if nums[0] / DOPPLER_UNIT > MAX_MS or nums[1] > MAX_BYTES:
            raise ProblemError(f"{source} line {5 + i}: op {i}'s comp {nums[0]} or comm {nums[1]} is past "
                               f"{MAX_MS * DOPPLER_UNIT:.0e} or {MAX_BYTES:.0e}, the problem format's ranges")
        tasks.append(Task(names[i], {g: nums[0] / DOPPLER_UNIT for g in gpus}))
        comm.append(float(nums[1]))
    edges = [Edge(names[a], names[b], comm[a]) for a, b in dict.fromkeys(zip(src, dst))]
    links = tuple(Link(a, b, DOPPLER_BANDWIDTH) for k, a in enumerate(gpus) for b in gpus[k + 1:])
    try:
        return Problem(tasks, edges, System(tuple(Device(g) for g in gpus), links), name=name)
    except ProblemError as exc:  # a cycle or a self-loop: the file's edges, lines 3-4, not a problem's field
        if not str(exc).startswith("edges: "):
            raise
        raise ProblemError(f"{source} lines 3-4: {str(exc).removeprefix('edges: ')}") from None


def read_doppler(path: str, devices: int) -> Problem:
    """:func:`doppler_problem` of the file at ``path``, named after it."""
    base = re.sub(r"\.txt$", "", path.replace("\\", "/").rsplit("/", 1)[-1]) or "doppler"
    return doppler_problem(read_text(path, ProblemError), devices, name=base, source=path)
