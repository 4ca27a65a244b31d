"""Docstrings and comments say what and why, not where a benchmark was reported.

Measured figures belong in BENCHMARKS.md (the latest run of each table) and
benchmarks/HISTORY.md (every earlier run); the code states the reason a rule or a
constant is what it is, so no docstring or comment under ``mapsched/`` points at
BENCHMARKS.md.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mapsched"

def _docstrings(tree: ast.AST) -> list[tuple[int, str]]:
    """The module's, every class's and every function's docstring, with its line."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                out.append((node.body[0].lineno, text))
    return out


def _comments(source: str) -> list[tuple[int, str]]:
    """Every comment, with its line."""
    return [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT]


def _mentions(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    found = _docstrings(ast.parse(source)) + _comments(source)
    return [f"{path.relative_to(ROOT).as_posix()}:{line}" for line, text in found if "BENCHMARKS" in text]


def test_no_docstring_or_comment_points_at_benchmarks() -> None:
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        hits += _mentions(path)
    assert not hits, "docstrings and comments should state the reason, not point at BENCHMARKS.md: " + ", ".join(hits)


def test_the_check_finds_a_pointer(tmp_path: Path) -> None:
    (tmp_path / "mapsched").mkdir()
    bad = tmp_path / "mapsched" / "bad.py"
    bad.write_text('"""Fast (see BENCHMARKS.md)."""\n\nx = 1  # BENCHMARKS.md, Table I\n', encoding="utf-8")
    source = bad.read_text(encoding="utf-8")
    assert len(_docstrings(ast.parse(source))) == 1 and len(_comments(source)) == 1
    assert [line for line, text in _docstrings(ast.parse(source)) + _comments(source) if "BENCHMARKS" in text] == [1, 3]
