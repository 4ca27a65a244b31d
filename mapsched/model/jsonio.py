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
import stat
from typing import Any

from mapsched.errors import MapschedError, OptionError, shown
from mapsched.model.files import write_file

__all__ = ["MAX_INPUT_BYTES", "check_fields", "check_format", "check_list", "dumps", "input_cap", "loads", "read_json",
           "read_text", "write_json"]

MAX_INPUT_BYTES = 2**30
"""The most bytes an input file may have (1 GiB, far above any real problem), unless the
environment variable ``MAPSCHED_MAX_INPUT_BYTES`` gives another: past it, a file (or an
endless device or pipe, ``/dev/zero``) is refused in one line rather than read until
memory runs out."""
MAX_INPUT_VARIABLE = "MAPSCHED_MAX_INPUT_BYTES"
_CHUNK = 2**20


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


class _Repeated(dict):
    """An object of the document in which ``key`` appeared more than once."""

    key: str


def _object(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object; one with a key twice is marked, to be refused once its place is known
    (``json`` itself keeps the last value, so ``"device": "ghost", "device": "p3"`` validated)."""
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    seen: set[str] = set()
    marked = _Repeated(value)
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


def _repeated(data: Any) -> tuple[str, str]:
    """Where the first object with a key twice sits in ``data`` (``jobs[3]``; ``""`` for the
    document itself), and that key."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, _Repeated):
            return where, value.key
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{shown(k, quote=False)}" if where else shown(k, quote=False))
                         for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
    raise AssertionError("no object marked")


def loads(text: str, source: str, err: type[MapschedError]) -> Any:
    """The JSON document of ``text`` (read from ``source``); malformed JSON, a document
    nested too deeply and an object with a key twice each become a one-line ``err``."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise err(f"{shown(source, quote=False)}: expected JSON text, got {type(text).__name__}")
    marked: list[bool] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        value = _object(items)
        if type(value) is _Repeated and not marked:
            marked.append(True)
        return value

    try:
        data = json.loads(text, parse_int=_int, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise err(f"{shown(source, quote=False)}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                  f"{exc.msg}") from None
    except RecursionError:  # json recurses once per level: a few thousand '[' exhaust the stack
        raise err(f"{shown(source, quote=False)}: JSON nested too deeply; the formats nest at most 4 levels") from None
    if marked:
        where, key = _repeated(data)
        field = f"{where}.{shown(key, quote=False)}" if where else shown(key, quote=False)
        raise err(f"{shown(source, quote=False)}: {field}: key {shown(key)} appears twice in "
                  f"{where or 'the document'}; give each key once") from None
    return data


def input_cap() -> int:
    """The most bytes an input file may have: :data:`MAX_INPUT_BYTES`, or the positive
    integer that ``MAPSCHED_MAX_INPUT_BYTES`` gives (an :class:`OptionError` if it is none)."""
    text = os.environ.get(MAX_INPUT_VARIABLE)
    if text is None or not text.strip():
        return MAX_INPUT_BYTES
    try:
        cap = int(text)
    except ValueError:
        cap = 0
    if cap < 1:
        raise OptionError(f"{MAX_INPUT_VARIABLE}: expected a positive whole number of bytes, got {shown(text)}")
    return cap


def read_text(path: str, err: type[MapschedError]) -> str:
    """Read a UTF-8 text file; a missing, binary or too large file becomes a one-line ``err``.

    At most :func:`input_cap` bytes are read, of a regular file, a device or a pipe alike:
    an endless input (``/dev/zero``, a FIFO that never ends) is refused once past it.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise err(f"path: expected a file path, got {type(path).__name__}")
    cap = input_cap()
    name = shown(os.fspath(path), quote=False)
    too_large = f"{name}: larger than {cap} bytes, the most an input file may have; " \
                f"set {MAX_INPUT_VARIABLE} to a larger number of bytes to read it"
    try:
        with open(path, "rb") as fh:
            if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                if os.fstat(fh.fileno()).st_size > cap:
                    raise err(too_large)
                raw = fh.read()
            else:  # a device or a pipe may never end: read it a chunk at a time, up to the cap
                chunks: list[bytes] = []
                size = 0
                while size <= cap:
                    chunk = fh.read(min(_CHUNK, cap + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                if size > cap:  # before joining: a second copy of a gigabyte would be read for nothing
                    raise err(too_large)
                raw = b"".join(chunks)
    except OSError as exc:
        raise err(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > cap:
        raise err(too_large)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise err(f"{name}: not a UTF-8 text file") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text  # as text mode reads it


def read_json(path: str, err: type[MapschedError]) -> Any:
    """Read a JSON file; a missing file, malformed JSON or a key twice becomes a one-line ``err``."""
    return loads(read_text(path, err), os.fspath(path) if isinstance(path, os.PathLike) else path, err)


def write_json(path: str, data: dict) -> None:
    """Write JSON safely (:func:`mapsched.model.files.write_file`): nothing half-written, links and devices kept."""
    write_file(path, dumps(data) + "\n")
