"""Writing the spool's files so a failed write leaves nothing behind, and locks between processes.

A full or read-only disk must cost the write that failed and nothing else: no zero-byte
file, no half line that would glue itself to the next append. Locks are ``flock``s, which
belong to an open file and so end with the process that held them, however it ended. A
lock file says what it is, so it is never an empty file either, and it appears under its
name whole (written aside, then linked into place).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def problem_of(exc: OSError) -> str:
    """What an operator reads in /healthz: ``full: ...`` or ``unwritable: ...``."""
    kind = "full" if exc.errno in FULL_ERRNOS else "unwritable"
    return f"{kind}: {exc.strerror or exc}"


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, or is as it was: written aside, then renamed over it."""
    aside = path.with_name(f".{path.name}.tmp")
    try:
        with aside.open("wb") as file:
            file.write(data)
        os.replace(aside, path)
    except OSError:
        aside.unlink(missing_ok=True)
        raise


def append_durable(path: Path, data: bytes) -> int:
    """Append ``data`` and fsync; on failure the file is cut back to what it held before.

    A torn last line (a write cut short by a crash or a power cut: no newline at the end)
    is cut off first, so nothing glues itself to it; returns how many bytes that cut.
    Unbuffered: a buffered file would write what it still holds once more as it closes,
    after the cut back, leaving a piece of the line that failed.
    """
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        whole = _whole_lines(fd, size)
        if whole < size:
            os.ftruncate(fd, whole)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError:
            _cut_back(fd, path, whole)
            raise
        return size - whole
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write is no error)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _whole_lines(fd: int, size: int) -> int:
    """How many of the file's first ``size`` bytes are whole lines."""
    end = size
    while end > 0:
        start = max(0, end - 4096)
        chunk = os.pread(fd, end - start, start)
        if end == size and chunk.endswith(b"\n"):
            return size
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def rewrite_in_place(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` (no longer than it is now), written over it from the start:
    no new block is needed, so it works on a full disk where a copy beside it cannot be
    written. Not atomic: a crash part-way leaves ``data`` followed by a piece of what was
    there (whole lines again, after one torn one), never less than ``data``."""
    with path.open("r+b") as file:
        if len(data) > os.fstat(file.fileno()).st_size:
            raise ValueError("rewrite_in_place only shortens a file")
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
        os.ftruncate(file.fileno(), len(data))
        os.fsync(file.fileno())


def _cut_back(fd: int, path: Path, size: int) -> None:
    try:
        if size == 0:
            path.unlink(missing_ok=True)
        else:
            os.ftruncate(fd, size)
    except OSError:
        pass  # the first failure is the one worth reporting


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")


def ensure_lock_file(path: Path, says: bytes) -> None:
    """Create ``path`` holding ``says`` unless it exists. Everyone opens the same file:
    it is linked into place, so a second creator finds it there instead of replacing it."""
    if path.exists():
        return
    aside = _aside(path)
    try:
        aside.write_bytes(says)
        os.link(aside, path)
    except FileExistsError:
        pass
    finally:
        aside.unlink(missing_ok=True)


def hold_lock(path: Path, says: bytes) -> int | None:
    """Take ``path``'s lock for as long as the returned descriptor stays open; None if taken.

    Created when absent. Raises OSError when the file can be neither opened nor created.
    """
    ensure_lock_file(path, says)
    return _locked(os.open(path, os.O_RDWR))


def create_held(path: Path, says: bytes) -> int:
    """A new lock file, locked before it appears under its name: nobody can find it free."""
    aside = _aside(path)
    try:
        aside.write_bytes(says)
        fd = os.open(aside, os.O_RDWR)
    except OSError:
        aside.unlink(missing_ok=True)
        raise
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.replace(aside, path)
    except OSError:
        os.close(fd)
        aside.unlink(missing_ok=True)
        raise
    return fd


def try_lock_existing(path: Path) -> int | None:
    """Lock an existing lock file; None when another open file holds it, or it is gone."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    return _locked(fd)


def _locked(fd: int) -> int | None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def shared_lock(path: Path, says: bytes, local: threading.Lock) -> Iterator[None]:
    """``local`` for this process's threads, and ``path``'s flock for other processes.

    A lock file that cannot be created (the disk is full or read-only) is done without:
    then nobody can write beside us either, and reading needs no lock.
    """
    with local:
        try:
            ensure_lock_file(path, says)
            fd = os.open(path, os.O_RDWR)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
