"""Writing output files without harming what is already there.

Every file mapsched writes goes through :func:`write_file` (or :func:`write_files`, for
outputs that go together), and every command that writes one calls :func:`check_output`
before it starts working, so that a bad path is refused before minutes of solving rather
than after:

- an output path that is one of the command's inputs (also through a link) is refused;
- a symbolic link is written through, to the file it points at, and stays a link;
- a special file (``/dev/null``, ``/dev/stdout``, a FIFO) is written to as it is, the
  way a shell's ``>`` does, never replaced by a regular file;
- a regular file is written to a temporary file beside it and renamed over it, so a
  failure leaves no half-written file; it keeps the mode of the file it replaces, and
  a new file gets ``0o666`` less the umask, as other tools create files.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Sequence

from mapsched.errors import OptionError, shown

__all__ = ["check_output", "is_stream", "names_stdout", "write_file", "write_files"]

STDOUT_NAMES = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
stdout_fd: int | None = None
"""Where the program's standard output went, where :func:`mapsched.cli.run` moved
descriptor 1 to stderr (so that native code cannot write into a printed schedule):
a path in ``STDOUT_NAMES``, or a link to one, is written there."""


def check_output(path: str, inputs: Iterable[str] = (), flag: str = "-o") -> None:
    """Refuse an output ``path`` that cannot be written or would destroy one of ``inputs``.

    Raises :class:`~mapsched.errors.OptionError` with a one-line message naming ``flag``.
    O(len(inputs)) system calls.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_output(os.path.join(folder, "out.json"))
    >>> check_output(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mapsched.errors.OptionError: -o: ... is a folder; give a file path inside it
    """
    if not path:
        raise OptionError(f"{flag}: expected a file path, got an empty string")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OptionError(f"{flag}: cannot use {shown(path)}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OptionError(f"{flag}: {shown(path)} is a folder; give a file path inside it")
    if st is not None:
        for source in inputs:
            try:
                same = os.path.samefile(path, source)
            except OSError:  # an input that is no file (builtin:NAME) cannot be overwritten
                same = False
            if same:
                raise OptionError(f"{flag}: {shown(path)} is the input {shown(source)}; writing there would "
                                  "destroy it, so choose another path")
    if st is not None and stat.S_ISREG(st.st_mode) and not os.access(path, os.W_OK):
        raise OptionError(f"{flag}: {shown(path)} is read-only; choose another path or make it writable")
    if st is None and path.endswith(os.sep):  # realpath drops the slash: "out/" wrote the file "out"
        raise OptionError(f"{flag}: {shown(path)} names a folder, which does not exist; give a file path")
    if st is None:
        folder = os.path.dirname(os.path.realpath(path)) or "."
        if not os.path.isdir(folder):
            raise OptionError(f"{flag}: no folder {shown(folder)} to write {shown(path)} in; create it first")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OptionError(f"{flag}: cannot create files in {shown(folder)}; choose another path")


def write_file(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` as the module docstring says; an error becomes one line.

    Raises :class:`~mapsched.errors.OptionError` when the file cannot be written;
    nothing is left half-written in a regular file. O(len(data)).
    """
    write_files([(path, data)])


def write_files(outputs: Sequence[tuple[str, str | bytes]]) -> None:
    """Write each ``(path, data)`` as :func:`write_file` does, all or none of them.

    Every regular file is first written in full to a temporary file beside it; special
    files (a device, a pipe) are written next; the renames come last. So a failure on
    any of them (a full disk, ``/dev/full``) leaves every regular file as it was, where a
    command's outputs go together (a schedule and the problem it solved). O(total data).
    """
    staged: list[tuple[str, str]] = []  # (temporary file, target) to rename at the end
    special: list[tuple[str, bytes]] = []
    try:
        for path, data in outputs:
            raw = data.encode("utf-8") if isinstance(data, str) else data
            if stdout_fd is not None and names_stdout(path):
                path = f"/dev/fd/{stdout_fd}"
            try:
                st = os.stat(path)
            except OSError:
                st = None
            try:
                if st is not None and stat.S_ISDIR(st.st_mode):
                    raise OptionError(f"{shown(path)} is a folder; give a file path inside it")
                if st is not None and not stat.S_ISREG(st.st_mode):
                    special.append((path, raw))  # a device or pipe: write to it, never replace it
                    continue
                target = os.path.realpath(path)
                staged.append((_staged(target, raw, None if st is None else stat.S_IMODE(st.st_mode)), target))
            except OSError as exc:
                raise OptionError(f"{shown(path, quote=False)}: cannot write: {exc.strerror or exc}") from None
        for path, raw in special:
            sys.stdout.flush()  # what was printed before comes first, where it is standard output
            try:
                with open(path, "wb") as fh:
                    fh.write(raw)
            except OSError as exc:
                raise OptionError(f"{shown(path, quote=False)}: cannot write: {exc.strerror or exc}") from None
        while staged:
            tmp, target = staged[0]
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise OptionError(f"{shown(target, quote=False)}: cannot write: {exc.strerror or exc}") from None
            staged.pop(0)
    finally:
        for tmp, _ in staged:
            os.unlink(tmp)


def is_stream(path: str) -> bool:
    """Whether ``path`` is written as a stream: standard output (:func:`names_stdout`), a
    device or a pipe, which is written to, never read back or replaced.

    Examples
    --------
    >>> is_stream("/dev/null"), is_stream("/no/such/file")
    (True, False)
    """
    if names_stdout(path):
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def names_stdout(path: str) -> bool:
    """Whether ``path`` is one of ``STDOUT_NAMES`` or a chain of links to one."""
    for _ in range(40):  # the kernel's own limit on links followed
        if os.path.normpath(path) in STDOUT_NAMES:
            return True
        try:
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        except OSError:
            return False
    return False


def _staged(target: str, raw: bytes, mode: int | None) -> str:
    """A temporary file in ``target``'s folder holding ``raw``, with ``mode`` (or a new
    file's), to be renamed over ``target``."""
    fd, tmp = tempfile.mkstemp(prefix=".mapsched-", dir=os.path.dirname(target) or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)  # mkstemp makes it 0o600
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere the only way to read it is to set it, then restore it
    os.umask(mask)
    return mask
