"""JSON documents: their text, their files, and the checks of their shape.

What every mapsched file format shares, below the classes that each one holds:
:mod:`mapsched.model.problem` and :mod:`mapsched.model.schedule` read and write their formats
(the contract of ``docs/format.md``) with these. A defect becomes a one-line
error of the caller's class (``err``) that names the field. Unknown fields are
rejected, so that a misspelt ``memroy`` cannot silently mean "unlimited memory".
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from mapsched.errors import MapschedError, shown
from mapsched.model.files import write_file

__all__ = ["check_fields", "check_format", "check_list", "dumps", "loads", "read_json", "read_text", "write_json"]


# ------------------------------------------------------------------ shapes
def check_fields(value: Any, where: str, allowed: set[str], required: tuple[str, ...], err: type) -> dict:
    """``value`` as an object with only the ``allowed`` fields and every ``required`` one."""
    if not isinstance(value, dict):
        raise err(f"{where}: expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise err(f"{where}: unknown field {shown(unknown[0])}; expected only {sorted(allowed)}")
    for key in required:
        if key not in value:
            raise err(f"{where}: missing field {shown(key)}")
    return value


def check_list(value: Any, where: str, err: type) -> list:
    """``value`` as a list."""
    if not isinstance(value, list):
        raise err(f"{where}: expected a list, got {type(value).__name__}")
    return value


def check_format(data: dict, expected: str, err: type) -> None:
    """The document's ``format`` tag is ``expected``."""
    tag = data.get("format")
    if tag != expected:
        raise err(f"format: expected {shown(expected)}, got {shown(tag)}")


# -------------------------------------------------------------- text, files
def dumps(data: dict, indent: int | None = 1) -> str:
    return json.dumps(data, indent=indent, allow_nan=False)


def _int(digits: str) -> int | float:
    """A JSON integer; one of 1e308 or more, past every field's range, reads as an infinity
    that the field's own check refuses in one line (as an int it would overflow later)."""
    if len(digits.lstrip("-")) > 308:
        return -math.inf if digits.startswith("-") else math.inf
    return int(digits)


def loads(text: str, source: str, err: type[MapschedError]) -> Any:
    if not isinstance(text, (str, bytes, bytearray)):
        raise err(f"{source}: expected JSON text, got {type(text).__name__}")
    try:
        return json.loads(text, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise err(f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # json recurses once per level: a few thousand '[' exhaust the stack
        raise err(f"{source}: JSON nested too deeply; the formats nest at most 4 levels") from None


def read_text(path: str, err: type[MapschedError]) -> str:
    """Read a UTF-8 text file; a missing or binary file becomes a one-line ``err``."""
    if not isinstance(path, (str, os.PathLike)):
        raise err(f"path: expected a file path, got {type(path).__name__}")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise err(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise err(f"{path}: not a UTF-8 text file") from None


def read_json(path: str, err: type[MapschedError]) -> Any:
    """Read a JSON file; a missing file or malformed JSON becomes a one-line ``err``."""
    return loads(read_text(path, err), path, err)


def write_json(path: str, data: dict) -> None:
    """Write JSON safely (:func:`mapsched.model.files.write_file`): nothing half-written, links and devices kept."""
    write_file(path, dumps(data) + "\n")
