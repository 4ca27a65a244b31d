import json
import subprocess
import sys

import pytest

import mapsched.generators
from mapsched import Schedule, instances, validate
from mapsched.cli import main


def test_methods_lists_options(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "single-best" in out and "--samples int" in out


def test_solve_writes_a_valid_schedule(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["solve", "builtin:topcuoglu2002", "--method", "random", "--samples", "50",
                 "--seed", "3", "-o", str(out)]) == 0
    assert "random: makespan" in capsys.readouterr().out
    s = Schedule.read(str(out))
    assert validate(instances.load(), s) == [] and s.method == "random"


def test_solve_prints_json_without_output(capsys):
    assert main(["solve", "builtin:topcuoglu2002", "--samples=5", "-m", "random"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["format"] == "mapsched.schedule/1"
    assert "makespan" in captured.err


@pytest.mark.parametrize("argv,message", [
    (["solve", "builtin:topcuoglu2002", "--method", "nope"], "unknown method 'nope'"),
    (["solve", "builtin:topcuoglu2002", "--method", "random", "--samples", "x"], "--samples"),
    (["solve", "builtin:topcuoglu2002", "--bogus", "1"], "has no such option"),
    (["solve", "builtin:topcuoglu2002", "-m", "split", "--module-time-limit", "-1"],
     "--module-time-limit: expected a number above 0"),
    (["solve", "builtin:topcuoglu2002", "--samples"], "expected a value"),
    (["solve", "builtin:topcuoglu2002", "-m", "exact", "--threads", "-3"], "--threads: expected an integer from 0 to 1024"),
    # HiGHS aborted the process at 100,000 threads, and CP-SAT raised a TypeError past 32 bits.
    (["solve", "builtin:topcuoglu2002", "-m", "exact", "--threads", str(10**20)], "--threads: expected an integer from 0"),
    (["solve", "builtin:topcuoglu2002", "-m", "split", "--module-threads", str(10**20)],
     "--module-threads: expected an integer from 0 to 1024"),
    (["solve", "builtin:topcuoglu2002", "-m", "exact", "--resolution", "1e300"],
     "--resolution: 1e+300 ticks per ms put the"),
    (["solve", "builtin:topcuoglu2002", "-m", "giph", "--ratio", "inf"], "--ratio: expected a finite number"),
    (["solve", "builtin:topcuoglu2002", "-m", "placeto", "--hidden", str(10**20)], "--hidden: expected an integer from 1 to 4096"),
    (["train", "giph", "-o", "x.pt", "--eval-cases", "2000"], "--eval-cases: expected an integer from 1 to 1000"),
    (["train", "giph", "-o", "x.pt", "--lr", "1e300"], "--lr: expected a number of at most 10"),
    (["train", "doppler", "builtin:topcuoglu2002", "-o", "x.pt", "--seed", str(2**63)],
     "--seed: expected an integer from 0 to 9223372036854775807"),
    # options another method reads were accepted and ignored
    (["train", "doppler", "builtin:topcuoglu2002", "-o", "x.pt", "--lr", "5"],
     "--lr: an option of giph training, which doppler does not read"),
    (["train", "placeto", "builtin:topcuoglu2002", "-o", "x.pt", "--suite", "multi"], "--suite: an option of giph"),
    (["train", "giph", "-o", "x.pt", "--stages", "il"], "--stages: an option of doppler, placeto training"),
    (["solve", "builtin:nope"], "unknown built-in instance"),
    (["frobnicate"], "invalid choice"),
    (["bound"], "required"),
    (["bound", "builtin:topcuoglu2002", "--time-limit", "-3"], "--time-limit: expected a positive number"),
    (["bound", "builtin:topcuoglu2002", "--window-time", "0"], "--window-time: expected a positive number"),
    (["methods", "--what"], "unrecognized arguments"),
    # NumPy refused the array size in a traceback.
    (["generate", "random-dag", "-o", "x.json", "--tasks", str(2**70)], "--tasks: expected an integer from 1 to"),
    (["generate", "stack", "-o", "x.json", "--nodes", str(10**8)], "--nodes: expected an integer from 1 to"),
    # each count within its range, their product 10^14 tasks: built until memory ran out
    (["generate", "stack", "-o", "x.json", "--modules", str(10**7), "--nodes", str(10**7)],
     "--modules x --nodes: about 100,000,000,000,000 tasks; generate builds at most 1,000,000"),
    (["generate", "transformer-train", "-o", "x.json", "--layers", "1000"], "--layers: about 1,576,000 tasks"),
    (["generate", "giph", "-o", "x.json", "--alpha", "1e-7"], "--alpha: expected a shape from 0.01 to 50"),  # named alpha
    # the message named tasks[1] of the generated problem, not the option given
    (["generate", "vgg", "-o", "x.json", "--batch", "5000"], "--batch: the generated devices cannot run 5000"),
])
def test_user_errors_are_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("mapsched: error:")


def test_out_of_memory_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    def huge(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(mapsched.generators, "random_dag", huge)
    out = tmp_path / "p.json"
    assert main(["generate", "random-dag", "--tasks", "10", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mapsched: error: out of memory in 'generate'") and err.count("\n") == 1
    assert not out.exists()


def test_bound_text_and_json(capsys):
    assert main(["bound", "builtin:topcuoglu2002", "--fast"]) == 0
    assert "transfer-path" in capsys.readouterr().out
    assert main(["bound", "builtin:topcuoglu2002", "--fast", "--json"]) == 0
    fast = json.loads(capsys.readouterr().out)  # above the critical path's 41: the path with transfers
    assert fast["rule"] == "transfer-path" and 41.0 < fast["lower_bound"] < 73.0
    # the full bound solves the exact model: the optimum, 73
    assert main(["bound", "builtin:topcuoglu2002", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rule"] == "exact" and out["lower_bound"] == pytest.approx(73.0)


def test_plot_and_demo(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    s = tmp_path / "s.json"
    assert main(["solve", "builtin:topcuoglu2002", "-o", str(s)]) == 0
    png = tmp_path / "g.png"
    assert main(["plot", str(s), "--problem", "builtin:topcuoglu2002", "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    demo_png = tmp_path / "demo.png"
    assert main(["demo", "--time-limit", "2", "-o", str(demo_png)]) == 0
    out = capsys.readouterr().out
    assert "single-best" in out and " NO " not in out and demo_png.exists()
    # then a DNN on a CPU, a T4 and an A100: heft and the default, each with its gap to the best bound
    dnn = out[out.index("<Problem 'inception"):]
    assert "heft" in dnn and "auto" in dnn and "gap" in dnn
    assert (tmp_path / "demo-dnn.png").read_bytes()[:4] == b"\x89PNG"
    # a job on a device the problem lacks was left out of the chart, unsaid
    data = json.loads(s.read_text())
    data["jobs"][0]["device"] = "zz"
    s.write_text(json.dumps(data))
    assert main(["plot", str(s), "--problem", "builtin:topcuoglu2002", "-o", str(tmp_path / "h.png")]) == 2
    err = capsys.readouterr().err
    assert "jobs[0]: task 't1', device 'zz'" in err and err.count("\n") == 1 and not (tmp_path / "h.png").exists()
    # an image format it cannot write is refused before the solves, not after them
    assert main(["demo", "-o", str(tmp_path / "demo.xyz")]) == 2
    captured = capsys.readouterr()
    assert "-o" in captured.err and captured.err.count("\n") == 1 and "single-best" not in captured.out


def test_plot_draws_names_as_written_and_refuses_what_it_cannot_write(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import shutil

    from mapsched import OptionError, Problem, solve
    from mapsched.plot import gantt

    p = Problem.from_arrays([[1.0, 2.0]] * 2, [(0, 1)], task_names=["$\\foo$", "b_$x^$"])  # mathtext: a traceback
    r = solve(p, "heft")
    png = tmp_path / "g.png"
    gantt(p, r, str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"
    for call, says in ((lambda: gantt(p, str(png), str(png)), "schedule: expected a mapsched.Schedule, got str"),
                       (lambda: gantt(r, p), "problem: expected a mapsched.Problem"),
                       (lambda: gantt(p, r, 5), "path: expected a file path or None, got int")):
        with pytest.raises(OptionError, match="^[^\n]*$") as err:
            call()
        assert says in str(err.value)
    # pgf needs LaTeX, found missing only after the whole demo had run
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["demo", "--time-limit", "1", "-o", str(tmp_path / "d.pgf")]) == 2
    captured = capsys.readouterr()
    assert "which is not installed" in captured.err and captured.err.count("\n") == 1 and not captured.out


def test_entry_point_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    proc = subprocess.run([sys.executable, "-m", "mapsched", "bound", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("mapsched: error:")


def test_native_writes_to_stdout_do_not_corrupt_a_printed_schedule():
    # HiGHS's MIP writes a debug line straight to file descriptor 1 in some solves; the
    # program must keep standard output for the schedule alone.
    code = ("import os, sys\n"
            "import mapsched.cli.solve as command\n"
            "from mapsched.cli import run\n"
            "real = command.solve\n"
            "def noisy(*a, **k):\n"
            "    os.write(1, b'native noise\\n')\n"
            "    return real(*a, **k)\n"
            "command.solve = noisy\n"
            "sys.argv = ['mapsched', 'solve', 'builtin:topcuoglu2002', '-m', 'heft']\n"
            "run()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["method"] == "heft"
    assert "native noise" in proc.stderr


def test_progress_bar_draws_after_a_second():
    import io

    from mapsched import solve
    from mapsched.cli import ProgressBar

    p = instances.load()
    stream = io.StringIO()
    with ProgressBar("sa", 1.5, stream=stream, enabled=True) as bar:
        r = solve(p, "sa", time_limit=1.5, iterations=10**9, callback=bar)
    assert bar.drawn and bar.best == r.makespan
    quiet = ProgressBar("sa", None, stream=io.StringIO())  # not a terminal: never draws
    with quiet:
        quiet(0.1, 5.0)
    assert not quiet.drawn


def test_generate_writes_valid_problems(tmp_path, capsys):
    from mapsched import Problem

    out = tmp_path / "p.json"
    assert main(["generate", "stack", "--modules", "2", "--channels", "2", "--variant", "wdep",
                 "--batch", "8", "--seed", "3", "-o", str(out)]) == 0
    p = Problem.read(str(out))
    assert p.objective.kind == "throughput" and p.L == 8
    assert main(["generate", "random-dag", "--tasks", "50", "-o", str(out)]) == 0
    assert Problem.read(str(out)).n == 50
    assert main(["generate", "stack", "--system", "moon", "-o", str(out)]) == 2
    assert "unknown system preset 'moon'" in capsys.readouterr().err
    assert main(["generate", "giph", "--seed", str(2**32), "-o", str(out)]) == 2  # was numpy's ValueError
    assert capsys.readouterr().err.strip() == ("mapsched: error: --seed: GiPH's generator takes a seed from 0 to "
                                               "4294967295, got 4294967296")


def test_simulate_retimes_a_schedule(tmp_path, capsys):
    sched, out = tmp_path / "s.json", tmp_path / "wc.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "heft", "-o", str(sched)]) == 0
    capsys.readouterr()
    assert main(["simulate", "builtin:topcuoglu2002", str(sched), "-o", str(out)]) == 0
    assert "work-conserving" in capsys.readouterr().out
    s, static = Schedule.read(str(out)), Schedule.read(str(sched))
    assert validate(instances.load(), s) == [] and s.method == "simulate: heft"
    assert s.mapping() == static.mapping() and s.lower_bound == static.lower_bound
    assert main(["simulate", "builtin:topcuoglu2002", str(sched), "-o", str(out), "--noise", "0.2", "--seed", "1"]) == 0
    assert "noise 0.2" in capsys.readouterr().out
    # another problem's schedule: its bound was copied, 768 ms above a 12 ms timeline
    data = json.loads(sched.read_text()) | {"problem": "another", "lower_bound": 1e6}
    sched.write_text(json.dumps(data))
    assert main(["simulate", "builtin:topcuoglu2002", str(sched), "-o", str(out)]) == 0
    assert Schedule.read(str(out)).lower_bound is None


def test_simulate_refusals_write_nothing(tmp_path, capsys):
    sched, out = tmp_path / "s.json", tmp_path / "wc.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "heft", "-o", str(sched)]) == 0
    data = json.loads(sched.read_text())
    data["jobs"] = [j for j in data["jobs"] if j["task"] != "t5"]
    sched.write_text(json.dumps(data))
    capsys.readouterr()
    for argv, message in [
        ([str(sched)], "task 't5' has inputs on no device"),
        ([str(sched), "--noise", "-1"], "--noise: expected a number from 0 to 5"),
        ([str(sched), "--noise", "nan"], "--noise: expected a number from 0 to 5"),
        ([str(sched), "--noise", "1e308", "--seed", "2"], "--noise: expected a number from 0 to 5"),  # hung
        ([str(tmp_path / "missing.json")], "missing.json"),
    ]:
        assert main(["simulate", "builtin:topcuoglu2002", *argv, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("mapsched: error:")
        assert not out.exists()


def test_generate_doppler_workloads(tmp_path, capsys):
    from mapsched import Problem

    out = tmp_path / "p.json"
    for kind, n in [("chainmm", 16), ("ffnn", 24), ("llama-block", 76), ("llama-layer", 84)]:
        assert main(["generate", kind, "--devices", "4", "-o", str(out)]) == 0
        p = Problem.read(str(out))
        assert (p.n, p.m) == (n, 4) and p.device_names == ("gpu0", "gpu1", "gpu2", "gpu3")
    assert main(["generate", "chainmm", "--devices", "2", "--system", "4-gpu-server", "-o", str(out)]) == 0
    assert Problem.read(str(out)).m == 5
    assert main(["generate", "ffnn", "--batch", "4", "-o", str(out)]) == 2
    assert "--batch: ffnn is one forward pass" in capsys.readouterr().err


def test_generate_takes_the_default_preset_when_given(tmp_path, capsys):
    # --system was compared with its default's name, so giving cpu-t4-a100 was as not giving it
    from mapsched import Problem

    out = tmp_path / "p.json"
    assert main(["generate", "chainmm", "--devices", "2", "--system", "cpu-t4-a100", "-o", str(out)]) == 0
    assert Problem.read(str(out)).device_names != ("gpu0", "gpu1")
    assert main(["generate", "gpt3", "--layers", "1", "--system", "cpu-t4-a100", "-o", str(out)]) == 0
    assert Problem.read(str(out)).m == 3  # not the multi-node preset's 30
    out.unlink()
    for kind in ("random-dag", "giph"):  # they drew their own devices and ignored it
        assert main(["generate", kind, "--system", "cpu-t4-a100", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--system: {kind} draws its own devices" in err and err.count("\n") == 1 and not out.exists()


def test_a_method_option_is_not_read_as_an_abbreviated_command_option(tmp_path):
    # argparse took sa's --init for solve's --initial, and failed to read a file named 'met'
    out = tmp_path / "s.json"
    assert main(["solve", "builtin:topcuoglu2002", "-m", "sa", "--init", "met", "--iterations", "10",
                 "-o", str(out)]) == 0
    assert Schedule.read(str(out)).method == "sa"


def test_the_documented_submodules_load_on_first_use():
    # README's mapsched.learned.load() raised AttributeError after a plain 'import mapsched'
    code = ("import sys, mapsched\n"
            "fns = [mapsched.learned.load, mapsched.scheduling.simulate.simulate, mapsched.model.symmetry.find_symmetry,\n"
            "       mapsched.engine.interrupt.graceful, mapsched.engine.relocation.Relocation, mapsched.model.convert.read_doppler]\n"
            "print('torch' in sys.modules, len(fns))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.split() == ["False", "6"], proc.stderr
