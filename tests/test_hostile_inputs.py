"""Hostile inputs (issue #67): each is refused in one line with status 2, nothing written.

Duplicate JSON keys, names with control characters or of 100,000 characters, endless
input files, a ``local:N`` cluster past any machine, user code that calls ``sys.exit``,
and a suite case with a misspelt keyword.
"""

import json
import os
import subprocess
import sys
import threading

import pytest

from mapsched import Problem, ProblemError, instances, solve
from mapsched.bench.sweep import Case, Suite
from mapsched.cli import main
from mapsched.engine.relocation import Relocation
from mapsched.errors import OptionError, shown
from mapsched.generators import random_wired, stack, vgg
from mapsched.model.jsonio import read_text

BASE = instances.load("topcuoglu2002")
MAX_INPUT_VARIABLE = "MAPSCHED_MAX_INPUT_BYTES"
HOSTILE = "t\n2\x1b[31m\x1b]0;pwned\x07" + "x" * 100_000  # a line break, ANSI escapes, 100 kB


def one_line(capsys) -> str:
    """The one line a refused command wrote to stderr (and nothing to stdout)."""
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("mapsched: error: "), err[:2000]
    assert "\x1b" not in err and "\x07" not in err and len(err) < 1000, err[:2000]
    assert "Traceback" not in err and not out
    return err


# --------------------------------------------------------------- 1: duplicate keys
def _files(tmp_path):
    problem, schedule = tmp_path / "p.json", tmp_path / "s.json"
    BASE.write(str(problem))
    solve(BASE, "heft").write(str(schedule))
    return problem, schedule


def test_a_key_twice_in_a_schedule_is_refused_naming_its_path(tmp_path, capsys):
    problem, schedule = _files(tmp_path)
    d = json.loads(schedule.read_text())
    jobs = [json.dumps(j) for j in d.pop("jobs")]
    # the fourth job's device given twice, the last one valid: it validated, as the last
    jobs[3] = jobs[3].replace('"device": ', '"device": "ghost", "device": ', 1)
    schedule.write_text(json.dumps(d)[:-1] + ', "jobs": [' + ", ".join(jobs) + "]}")
    assert main(["validate", str(problem), str(schedule)]) == 2
    err = one_line(capsys)
    assert "jobs[3].device: key 'device' appears twice in jobs[3]" in err and str(schedule) in err


@pytest.mark.parametrize("where,text,says", [
    ("problem", '{"format": "mapsched.problem/1", "format": "mapsched.problem/1"}',
     "format: key 'format' appears twice in the document"),
    ("problem", '{"devices": [{"name": "a"}, {"name": "b", "memory": 1, "memory": 2}]}',
     "devices[1].memory: key 'memory' appears twice in devices[1]"),
    ("problem", '{"tasks": [{"latency": {"p1": {"1": 2, "1": 3}}}]}',
     "tasks[0].latency.p1.1: key '1' appears twice in tasks[0].latency.p1"),
    ("relocation", '{"format": "mapsched.relocation/1", "startup": 1, "startup": 2}',
     "startup: key 'startup' appears twice in the document"),
])
def test_a_key_twice_is_refused_in_every_format(tmp_path, where, text, says):
    path = tmp_path / f"{where}.json"
    path.write_text(text)
    read = {"problem": lambda: Problem.read(str(path)), "relocation": lambda: Relocation.read(str(path))}[where]
    with pytest.raises((ProblemError, OptionError)) as info:
        read()
    assert says in str(info.value) and "\n" not in str(info.value)


def test_a_key_twice_on_the_command_line_problem(tmp_path, capsys):
    path = tmp_path / "p.json"
    d = BASE.to_dict()
    text = json.dumps(d).replace('"name": "p3"', '"name": "p3", "name": "p4"', 1)
    path.write_text(text)
    assert main(["validate", str(path), str(path)]) == 2
    assert "devices[2].name: key 'name' appears twice in devices[2]" in one_line(capsys)


# ---------------------------------------------------------- 2: names shown escaped
def test_shown_escapes_and_shortens():
    from mapsched.errors import SHOWN_LENGTH

    assert shown("conv1") == "'conv1'" and shown("conv1", quote=False) == "conv1"
    text = shown(HOSTILE)
    assert "\n" not in text and "\x1b" not in text and "\\n" in text and "\\x1b" in text
    assert len(text) == SHOWN_LENGTH and "..." in text
    assert len(shown(HOSTILE, quote=False)) == SHOWN_LENGTH


def _cycle_problem(names):
    d = BASE.to_dict()
    for t, name in zip(d["tasks"], names):
        old = t["name"]
        t["name"] = name
        for e in d["edges"]:
            e["src"] = name if e["src"] == old else e["src"]
            e["dst"] = name if e["dst"] == old else e["dst"]
    d["edges"].append({"src": d["tasks"][-1]["name"], "dst": d["tasks"][0]["name"]})
    return d


def test_a_cycle_through_hostile_names_is_one_short_line(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_cycle_problem([HOSTILE, "b\r\nc", "\u202eevil"])))
    assert main(["validate", str(path), str(path)]) == 2
    err = one_line(capsys)
    assert "the task graph has a cycle t\\n2\\x1b[31m" in err and "\r" not in err and "\u202e" not in err


def test_an_initial_placement_shows_an_unknown_name_shortened(tmp_path, capsys):
    problem, schedule = _files(tmp_path)
    d = json.loads(schedule.read_text())
    d["jobs"][0]["task"] = HOSTILE
    schedule.write_text(json.dumps(d))
    out = tmp_path / "new.json"
    assert main(["solve", str(problem), "-m", "sa", "--initial", str(schedule), "-o", str(out)]) == 2
    err = one_line(capsys)
    assert "initial: task 't\\n2\\x1b[31m" in err and not out.exists()


def test_a_control_character_that_reaches_a_message_is_escaped():
    exc = ProblemError("name a\nb\x1b[2J" + "y" * 100_000)
    assert "\n" not in str(exc) and "\x1b" not in str(exc) and len(str(exc)) <= 4000


# ------------------------------------------------------------ 3: endless input
ZERO = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a reader without a cap: out of memory, not the box
from mapsched.cli import main
sys.exit(main(["validate", "/dev/zero", "/dev/zero"]))
"""


def test_an_endless_device_is_refused_past_the_cap():
    env = {**os.environ, MAX_INPUT_VARIABLE: "100000"}
    proc = subprocess.run([sys.executable, "-c", ZERO], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "mapsched: error: /dev/zero: larger than 100000 bytes" in proc.stderr and MAX_INPUT_VARIABLE in proc.stderr


def test_an_endless_fifo_is_refused_past_the_cap(tmp_path, monkeypatch):
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    monkeypatch.setenv(MAX_INPUT_VARIABLE, str(3 * 2**20))

    def write():  # "endless" to a reader with a cap of 3 MiB; 8 MiB, so that one without a cap ends too
        try:
            with open(fifo, "wb") as fh:
                for _ in range(128):
                    fh.write(b" " * 65536)
        except OSError:  # the reader stopped at its cap and closed the pipe
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with pytest.raises(ProblemError, match=r"endless: larger than 3145728 bytes"):
        Problem.read(str(fifo))
    writer.join(10)
    assert not writer.is_alive()


def test_a_regular_file_past_the_cap_is_refused_and_one_under_it_read(tmp_path, monkeypatch, capsys):
    problem, schedule = _files(tmp_path)
    size = problem.stat().st_size
    monkeypatch.setenv(MAX_INPUT_VARIABLE, str(size))
    assert Problem.read(str(problem)).n == BASE.n
    monkeypatch.setenv(MAX_INPUT_VARIABLE, str(size - 1))
    assert main(["validate", str(problem), str(schedule)]) == 2
    assert f"larger than {size - 1} bytes" in one_line(capsys)


def test_the_cap_defaults_to_a_gibibyte_and_its_variable_is_checked(monkeypatch):
    from mapsched.model.jsonio import MAX_INPUT_BYTES, input_cap

    monkeypatch.delenv(MAX_INPUT_VARIABLE, raising=False)
    assert input_cap() == MAX_INPUT_BYTES == 2**30
    monkeypatch.setenv(MAX_INPUT_VARIABLE, "lots")
    with pytest.raises(OptionError, match="MAPSCHED_MAX_INPUT_BYTES: expected a positive whole number"):
        read_text("/dev/null", ProblemError)


# -------------------------------------------------------------- 4: local:N bound
def test_a_local_cluster_past_the_machine_is_refused(capsys):
    most = 4 * len(os.sched_getaffinity(0))
    assert main(["solve", "builtin:topcuoglu2002", "-m", "split", "--dask", f"local:{most + 1}"]) == 2
    assert f"local:N starts N worker processes, at most {most}" in one_line(capsys)
    assert main(["bound", "builtin:topcuoglu2002", "--dask", "local:" + "9" * 5000]) == 2
    assert f"at most {most}" in one_line(capsys)


# ---------------------------------------------------------- 5: user code exits
EXITS = {
    "exit0": "import sys\nsys.exit(0)\n",
    "interrupt": "raise KeyboardInterrupt\n",
    "base": "class Stop(BaseException):\n    pass\nraise Stop('done')\n",
}


@pytest.mark.parametrize("kind", EXITS)
def test_a_suites_file_that_exits_is_reported_in_one_line(tmp_path, capsys, kind):
    suites = tmp_path / f"{kind}_suites.py"
    suites.write_text(EXITS[kind])
    out = tmp_path / "rows.jsonl"
    assert main(["bench", "s", "--suites", str(suites), "-o", str(out)]) == 2
    err = one_line(capsys)
    assert f"--suites: running {shown(str(suites))}" in err and "must not end mapsched" in err
    assert {"exit0": "sys.exit(0)", "interrupt": "KeyboardInterrupt", "base": "Stop"}[kind] in err
    assert not out.exists()


def test_a_case_builder_that_exits_is_reported_in_one_line(tmp_path, capsys):
    suites = tmp_path / "suites.py"
    suites.write_text("import sys\nfrom mapsched.bench.sweep import Case, Suite\n"
                      "def make():\n    sys.exit(3)\n"
                      "SUITES = {'s': Suite('s', (Case('a', make, {}),), ('heft',), 5.0)}\n")
    out = tmp_path / "rows.jsonl"
    assert main(["bench", "s", "--suites", str(suites), "-o", str(out)]) == 2
    assert "case 'a': make(**kwargs) called sys.exit(3)" in one_line(capsys)
    assert not out.exists()


def _user_module(tmp_path, monkeypatch, name, text):
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("text,says", [
    ("import sys\nsys.exit(0)\ndef f():\n    pass\n", "model: importing 'hostile_exit' called sys.exit(0)"),
    ("import sys\ndef f():\n    sys.exit(5)\n", "model: hostile_exit:f() called sys.exit(5) in module 'hostile_exit'"),
    ("def f():\n    raise KeyboardInterrupt\n", "model: hostile_exit:f() raised KeyboardInterrupt"),
])
def test_a_model_module_that_exits_is_one_error(tmp_path, monkeypatch, text, says):
    from mapsched.usercode import load_model

    _user_module(tmp_path, monkeypatch, "hostile_exit", text)
    with pytest.raises(OptionError) as info:
        load_model("hostile_exit:f")
    assert says in str(info.value) and "must not end mapsched" in str(info.value)


def test_profile_of_a_model_module_that_exits_is_one_error(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    _user_module(tmp_path, monkeypatch, "hostile_exit_cli", "import sys\nsys.exit(0)\n")
    out = tmp_path / "p.json"
    assert main(["profile", "hostile_exit_cli:f", "--devices", "cpu", "-o", str(out)]) == 2
    assert "model: importing 'hostile_exit_cli' called sys.exit(0)" in one_line(capsys)
    assert not out.exists()



def test_profile_of_a_model_whose_forward_exits_is_one_error(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    text = ("import sys\nimport torch\n\n\nclass M(torch.nn.Module):\n    input_shape = (1, 4)\n\n"
            "    def forward(self, x):\n        sys.exit(3)\n\n\ndef f():\n    return M()\n")
    _user_module(tmp_path, monkeypatch, "hostile_forward_exit", text)
    out = tmp_path / "p.json"
    assert main(["profile", "hostile_forward_exit:f", "--devices", "cpu", "-o", str(out)]) == 2
    assert "model: running it called sys.exit(3)" in one_line(capsys)
    assert not out.exists()

# ------------------------------------------------------ 6: misspelt case keywords
@pytest.mark.parametrize("case,says", [
    ("Case('a', random_wired, {'n': 4, 'nope': 5})",
     "case 'a': random_wired: unknown keyword 'nope'; it takes n, kind, seed, variant, platform, objective, "
     "batch_sizes and, for kind 'er', p"),
    ("Case('a', vgg, {'depht': 13})", "case 'a': vgg() takes no keyword 'depht'; it takes depth, platform"),
])
def test_a_case_with_a_misspelt_keyword_is_refused(tmp_path, capsys, case, says):
    suites = tmp_path / "suites.py"
    suites.write_text("from mapsched.bench.sweep import Case, Suite\n"
                      "from mapsched.generators import random_wired, vgg\n"
                      f"SUITES = {{'s': Suite('s', ({case},), ('heft',), 5.0)}}\n")
    out = tmp_path / "rows.jsonl"
    assert main(["bench", "s", "--suites", str(suites), "-o", str(out)]) == 2
    assert says in one_line(capsys)
    assert not out.exists()


def test_generators_refuse_what_their_kwargs_would_swallow():
    with pytest.raises(OptionError, match=r"random_wired: unknown keyword 'nope'"):
        random_wired(4, nope=5)
    with pytest.raises(OptionError, match=r"stack: unknown keyword 'k'; .* for kind 'er', p"):
        stack(2, 4, k=3)
    with pytest.raises(OptionError, match="takes no keyword 'depht'"):
        Suite("s", (Case("a", vgg, {"depht": 13}),), ("heft",), 5.0).check()
    assert stack(2, 4, kind="ws", k=2, p=0.5).n > 0 and random_wired(4, kind="ba", m=2).n > 0
