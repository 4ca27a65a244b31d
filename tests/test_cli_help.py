"""Every command's ``--help`` works, and the README's commands still parse."""

import argparse
import pathlib
import re
import shlex

import pytest

from mapsched.cli import build_parser, main
from mapsched.engine import registry

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mapsched")
    assert all(name in out for name in _commands())


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_command_prints_its_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: mapsched {command}")


def _readme_commands() -> list[str]:
    """Each ``mapsched ...`` command in the README's fenced blocks: a line of its own, or one
    after ``&&``, ``;`` or ``|`` on a line (the fresh-machine commands install first)."""
    found, fenced = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            found += [part.strip() for part in re.split(r"&&|;|\|", line) if part.strip().startswith("mapsched ")]
    return found


def test_the_readme_shows_mapsched_commands():
    assert any(c.split()[1] == "demo" for c in _readme_commands())


@pytest.mark.parametrize("command", _readme_commands())
def test_a_readme_command_parses(command):
    # The README writes placeholders where a value goes: a port stands in for PORT.
    argv = [re.sub(r"\bPORT\b", "8786", a) for a in shlex.split(command, comments=True)[1:]]
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # only solve and adapt take more: the options of their method
        assert args.command in ("solve", "adapt"), extra
        names = {f"--{o.name.replace('_', '-')}" for o in registry.get(args.method).options}
        assert {a.split("=")[0] for a in extra if a.startswith("--")} <= names, extra
