"""One writer per output folder, and writes that never leave a half-written file.

* :func:`locked_dir` -- ``with locked_dir(path): ...`` holds ``PATH/.crossprofile.lock`` (JSON:
  pid, host, start time, command) for the duration of the block. The file is created with
  ``O_CREAT | O_EXCL`` (atomic), so of two runs on one ``--out`` exactly one gets it; the other
  raises :class:`FolderLocked` at once, naming the holder. A lock left by a process that no
  longer exists on this host (``kill -9``, power loss) is taken over, with a notice on stderr.
  The lock is released when the block ends, also on an exception or Ctrl-C. A lock held by
  another host is never taken over (its process cannot be checked): remove it by hand.
* :func:`atomic_write` -- ``with atomic_write(dest) as tmp: write(tmp)`` writes to a unique
  temporary name in the destination's folder and renames it over ``dest`` (``os.replace``,
  atomic on POSIX) only when the block succeeds; readers see the old file or the new one, never
  a torn one. :func:`write_text_atomic` is the one-liner for text.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

LOCK_NAME = ".crossprofile.lock"
_HELD: set[str] = set()  # lock files this process holds (for re-entrant use)


class FolderLocked(ValueError):
    """Another live process holds the output folder's lock (a ``ValueError``: the command line
    reports it as a usage error, exit 2)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_lock(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _describe(info: dict) -> str:
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')} since {info.get('started', '?')}"
            + (f" ({info['command']})" if info.get("command") else ""))


def _try_create(lock: Path, info: dict) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(info) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return True


def acquire(folder: Path | str) -> Path:
    """Take ``folder``'s lock (see module doc); returns the lock file's path."""
    folder = Path(folder)
    check_writable(folder)
    lock = folder / LOCK_NAME
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:6]))}
    for _ in range(3):
        if _try_create(lock, info):
            return lock
        held = _read_lock(lock)
        if not held:  # created an instant ago and not yet written, or garbage: look again
            time.sleep(0.05)
            held = _read_lock(lock)
        pid = held.get("pid")
        same_host = held.get("host") == info["host"]
        ours_left = pid == os.getpid() and str(lock.resolve()) not in _HELD  # a reused pid's old lock
        if held and same_host and isinstance(pid, int) and (ours_left or not _pid_alive(pid)):
            # stale: its process is gone. Rename it away atomically so only one taker wins.
            stale = folder / f"{LOCK_NAME}.stale-{os.getpid()}"
            try:
                os.replace(lock, stale)
            except FileNotFoundError:
                continue  # someone else took it over first; try again
            if _read_lock(stale).get("pid") != pid:  # we moved a fresh lock by mistake: put it back
                with contextlib.suppress(OSError):
                    os.link(stale, lock)
                stale.unlink(missing_ok=True)
                continue
            stale.unlink(missing_ok=True)
            print(f"notice: {folder}: took over a stale lock left by {_describe(held)} "
                  f"(that process no longer holds it)", file=sys.stderr)
            continue
        if not held:
            raise FolderLocked(f"{folder}: output folder is locked by {lock} (unreadable lock file); if no run "
                               f"is using this folder, delete {lock}")
        hint = ("" if same_host else f"; it is on another host, so it cannot be checked here: if that run is "
                f"over, delete {lock}")
        raise FolderLocked(f"{folder}: output folder is in use by another run: {_describe(held)} "
                           f"(rule: one run per output folder; wait for it or choose another --out){hint}")
    raise FolderLocked(f"{folder}: could not take the lock {lock} (it kept changing hands)")


def release(lock: Path) -> None:
    """Remove ``lock`` if this process still holds it."""
    if _read_lock(lock).get("pid") == os.getpid():
        lock.unlink(missing_ok=True)


@contextlib.contextmanager
def locked_dir(folder: Path | str) -> Iterator[Path]:
    """Hold ``folder``'s lock for the block (re-entrant within one process); yields the folder."""
    folder = Path(folder)
    key = str((folder / LOCK_NAME).resolve())
    if key in _HELD:  # nested use in one process (the CLI, then run_to_dir)
        yield folder
        return
    created = not folder.exists()
    lock = acquire(folder)
    _HELD.add(key)
    try:
        yield folder
    finally:
        _HELD.discard(key)
        release(lock)
        if created:  # a block that wrote nothing (e.g. refused its options) leaves no empty folder behind
            with contextlib.suppress(OSError):
                folder.rmdir()


@contextlib.contextmanager
def atomic_write(dest: Path | str) -> Iterator[Path]:
    """Yield a unique temporary path next to ``dest``; on success rename it over ``dest``."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with contextlib.suppress(OSError):  # durability where the file system allows it
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(dest: Path | str, text: str) -> None:
    with atomic_write(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


def check_writable(folder: Path | str) -> None:
    """Fail early (``ValueError`` naming the folder) when ``folder`` cannot hold a run's output."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"--out {folder}: cannot write there ({errno.errorcode.get(e.errno, e.errno)}: "
                         f"{e.strerror})") from None
