"""``mapsched convert --from doppler``: DOPPLER's graph files as problems."""

import re

import numpy as np
import pytest

from mapsched import Problem, ProblemError, validate
from mapsched.cli import main
from mapsched.model.convert import doppler_problem
from mapsched.scheduling.simulate import simulate

# 5 nodes, inputs 0 and 1 dropped: ops 0..2; 0 -> 2 twice (kept once), 1 -> 2. The gdp_ form's op type word.
TEXT = "5\n0, 1, \n0, 0, 1, \n2, 2, 2,\n10000000000,40000000000\n20000000000,80000000000,einsummable\n" \
       "10000000000,40000000000\n"


def test_reads_doppler_units():
    p = doppler_problem(TEXT, 2, name="tiny")
    assert p.task_names == ("v0", "v1", "v2") and p.device_names == ("gpu0", "gpu1")
    assert p.dur.tolist() == [[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]
    assert [(e.src, e.dst, e.bytes) for e in p.edges] == [("v0", "v2", 4e10), ("v1", "v2", 8e10)]
    assert np.isinf(p.mem).all()
    # DOPPLER's simulator: v2 waits for v1 (ends at 2) plus comm[v1] / 1e10 = 8 across devices.
    s = simulate(p, [0, 1, 0])
    assert [(j.task, j.start, j.end) for j in s.jobs] == [("v0", 0, 1), ("v1", 0, 2), ("v2", 10, 11)]
    assert validate(p, s) == [] and simulate(p, [0, 0, 0]).makespan == 4


@pytest.mark.parametrize("text,message", [
    ("3\n0\n", "2 lines"),
    ("x\n\n\n\n", "line 1: expected the number of nodes"),
    ("2\n0, 1\n\n\n", "no op is left"),
    ("3\n0\n0, 1\n1\n1,4\n1,4\n", "1 edge targets for 2 sources"),
    ("3\n0\n0\n2\n1,4\n1,4\n", "edge 0 (0 -> 2) names an op outside 0..1"),
    ("3\n0\n0\n1\n1,4\n", "1 op lines after line 4, expected 2"),
    ("3\n0\n0\n1\n1,4\nfour\n", "line 6: expected 'comp,comm' for op 1"),
    ("3\n0\n0, 1\n1, 0\n1,4\n1,4\n", "doppler file lines 3-4: the task graph has a cycle"),  # named edges:
    # Python's int() raised past 4,300 digits, and float() past 1e308 (tracebacks)
    ("3" + "0" * 5000 + "\n0\n0\n1\n1,4\n1,4\n", "line 1: a number of 5001 digits"),
    ("3\n0\n0\n1\n1,4\n1,4" + "0" * 400 + "\n", "line 6: a number of 401 digits"),
    ("3\n0\n0\n1\n1,4\n1,4" + "0" * 25 + "\n", "line 6: op 1's comp 1 or comm 4" + "0" * 25 + " is past"),
])
def test_bad_files_one_line(text, message):
    with pytest.raises(ProblemError, match=re.escape(message)):
        doppler_problem(text, 2)


def test_command(tmp_path, capsys):
    src, out = tmp_path / "chain_mm_5nodes.txt", tmp_path / "p.json"
    src.write_text(TEXT)
    assert main(["convert", str(src), "--from", "doppler", "--devices", "4", "-o", str(out)]) == 0
    assert "DOPPLER's simulator units" in capsys.readouterr().out
    p = Problem.read(str(out))
    assert p.name == "chain_mm_5nodes" and (p.n, p.m, p.E) == (3, 4, 2)
    for argv, message in [
        (["convert", str(src), "--devices", "4", "-o", str(out)], "--from"),
        (["convert", str(src), "--from", "tvm", "--devices", "4", "-o", str(out)], "invalid choice"),
        (["convert", str(src), "--from", "doppler", "--devices", str(10**6), "-o", str(out)],
         "--devices: expected an integer from 1 to 1024"),
        (["convert", str(src), "--from", "doppler", "--devices", "0", "-o", str(out)], "--devices"),
        (["convert", str(tmp_path / "nope.txt"), "--from", "doppler", "--devices", "2", "-o", str(out)],
         "nope.txt: cannot read"),
    ]:
        out.unlink(missing_ok=True)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and not out.exists()
