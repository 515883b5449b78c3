"""One writer per output folder, and writes that never leave a half-written file.

* :func:`locked_dir` -- holds ``PATH/.crossprofile.lock`` (JSON: pid, host, start time, redacted command line),
  created with ``O_CREAT | O_EXCL``: of two runs on one ``--out`` one gets it, the other raises :class:`FolderLocked`
  naming the holder. A lock left by a dead process on this host is taken over with a notice; another host's never is.
* :func:`atomic_write` / :func:`write_text_atomic` -- a temporary file beside ``dest``, renamed over it on success; a
  failed write raises :class:`WriteError` naming the file and the cause, the old file unchanged.
* :func:`check_output_folder` / :func:`check_output_file` -- the one "would this destroy existing work" check
  (:class:`WouldDestroy`, exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from crossprofile_lib.safety.inputs import path_problem
from crossprofile_lib.safety.redact import mask_known, redact_argv

LOCK_NAME = ".crossprofile.lock"
_LOCK_MAX_BYTES = 64 * 1024
_HELD: set[str] = set()  # lock files this process holds (for re-entrant use)


class FolderLocked(ValueError):
    """Another live process holds the output folder's lock (a usage error, exit 2)."""


class WouldDestroy(ValueError):
    """Writing this output would overwrite or mix with existing work (a usage error, exit 2)."""


class WriteError(OSError):
    """A file could not be written (full disk, file too large, read-only folder); ``str()`` names the
    file and the cause."""

    def __str__(self) -> str:
        return str(self.strerror)


def _why(e: OSError) -> str:
    name = errno.errorcode.get(e.errno, "") if e.errno else ""
    hint = {errno.ENOSPC: "the disk is full: free some space and rerun",
            errno.EDQUOT: "the disk quota is exhausted: free some space and rerun",
            errno.EFBIG: "the file is larger than this process may write (file-size limit)",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied"}.get(e.errno)
    return f"{e.strerror or e}" + (f" ({name})" if name else "") + (f"; {hint}" if hint else "")


def write_error(dest, e: OSError, what: str = "cannot write") -> WriteError:
    """A :class:`WriteError` for ``e`` while writing ``dest``."""
    err = WriteError(e.errno, f"{what} {dest}: {_why(e)}; its previous version (if any) is unchanged")
    err.filename = str(dest)
    return err


def current_umask() -> int:
    """The process's umask (read from /proc where possible, so no other thread sees it change)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    m = os.umask(0o022)
    os.umask(m)
    return m


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _process_start(pid: int) -> Optional[float]:
    """When process ``pid`` started (seconds since the epoch), where the system says (Linux ``/proc``); else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as fh:
            btime = next(int(ln.split()[1]) for ln in fh if ln.startswith(b"btime"))
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _pid_reused(pid: int, started) -> bool:
    """Whether the live process ``pid`` started after the lock it appears in was written (``started``, UTC): then
    it is another program that was given the dead holder's pid, and the lock is stale."""
    try:
        written = time.mktime(time.strptime(str(started), "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    except (ValueError, OverflowError):
        return False
    begun = _process_start(pid)
    return begun is not None and begun > written + 2  # the holder starts before it writes (seconds, truncated)


def _read_lock(path: Path) -> dict:
    with contextlib.suppress(OSError, ValueError, RecursionError), open(path, "rb") as fh:
        info = json.loads(fh.read(_LOCK_MAX_BYTES).decode("utf-8"))
        return info if isinstance(info, dict) else {}
    return {}


def _describe(info: dict) -> str:
    cmd = info.get("command")
    cmd = " ".join(redact_argv(str(cmd).split()))[:300] if cmd else ""  # also a lock left by an older version
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')} since {info.get('started', '?')}"
            + (f" ({cmd})" if cmd else ""))


def _try_create(lock: Path, info: dict) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError as e:
        raise ValueError(f"--out {lock.parent}: cannot create the lock file {lock} ({_why(e)})") from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(info) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:  # a full disk: leave no empty lock behind (it would block the next run)
        lock.unlink(missing_ok=True)
        raise ValueError(f"--out {lock.parent}: cannot write the lock file {lock} ({_why(e)})") from None
    return True


def acquire(folder: Path | str) -> Path:
    """Take ``folder``'s lock (see module doc); returns the lock file's path."""
    folder = Path(folder)
    check_writable(folder)
    lock = folder / LOCK_NAME
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(redact_argv(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:8])))}
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
        reused = held and same_host and isinstance(pid, int) and not ours_left and _pid_alive(pid) and _pid_reused(
            pid, held.get("started"))
        if held and same_host and isinstance(pid, int) and (ours_left or reused or not _pid_alive(pid)):
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
            why = (f"pid {pid} now belongs to another process, started after the lock was written" if reused
                   else "that process no longer holds it")
            print(f"notice: {folder}: took over a stale lock left by {_describe(held)} ({why})", file=sys.stderr)
            continue
        if not held:
            raise FolderLocked(f"{folder}: output folder is locked by {lock} (unreadable lock file); if no run "
                               f"is using this folder, delete {lock}")
        hint = (f"; if no run is using this folder (the pid may now belong to another program), delete {lock} and "
                f"rerun" if same_host else f"; it is on another host, so it cannot be checked here: if that run is "
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
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name[:200]}.", suffix=".tmp", dir=dest.parent)
        try:
            os.fchmod(fd, 0o666 & ~current_umask())  # the mode any other new file gets, not mkstemp's 0600
        finally:
            os.close(fd)
    except OSError as e:
        raise write_error(dest, e) from None
    tmp = Path(tmp)
    try:
        yield tmp
        with contextlib.suppress(OSError), open(tmp, "rb") as fh:  # durability where the file system allows it
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, WriteError):  # ENOSPC, EFBIG, EROFS...: named
            raise write_error(dest, e) from None
        raise


def clean_leftovers(folder: Path | str, names: Iterable[str]) -> list[str]:
    """Remove the temporary files :func:`atomic_write` left beside each of ``names`` in ``folder`` when its process
    was killed mid-write (``.results.parquet.XXXX.tmp``); only call it holding the folder's lock (no other writer
    can own one). Returns the names removed (a notice says so)."""
    folder, gone = Path(folder), []
    for name in names:
        for p in folder.glob(f".{glob.escape(name[:200])}.*.tmp"):
            with contextlib.suppress(OSError):
                if p.is_file() and not p.is_symlink():
                    p.unlink()
                    gone.append(p.name)
    if gone:
        print(f"notice: {folder}: removed {len(gone)} temporary file(s) an interrupted write left behind "
              f"({', '.join(sorted(gone)[:3])}{', ...' if len(gone) > 3 else ''})", file=sys.stderr)
    return gone


def write_text_atomic(dest: Path | str, text: str) -> None:
    """``text`` written atomically, every known secret masked (:func:`~crossprofile_lib.safety.redact.mask_known`:
    no key reaches a file the suite writes)."""
    with atomic_write(dest) as tmp:
        tmp.write_text(mask_known(text), encoding="utf-8")


def _probe(folder) -> None:
    """Create and remove a file in ``folder`` (root may pass ``os.access`` where nothing can be created)."""
    fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=folder)
    os.close(fd)
    os.unlink(probe)


def check_writable(folder: Path | str) -> None:
    """Fail early (``ValueError`` naming the folder) when ``folder`` cannot hold a run's output."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder)
    except OSError as e:
        raise ValueError(f"--out {folder}: cannot write there ({errno.errorcode.get(e.errno, e.errno)}: "
                         f"{e.strerror})") from None


# --- would this destroy existing work? ------------------------------------------------------------

#: What each kind of output folder holds (the files that mark it as that kind).
OUTPUT_KINDS = {"run": ("results.parquet", "run.json"),
                "hiddenbench run": ("hiddenbench_run.json", "hiddenbench_controlled.parquet",
                                    "hiddenbench_natural_decisions.parquet", "artefacts/controlled.jsonl",
                                    "artefacts/natural.jsonl")}


def _real(p) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(p)))


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def _size(p: Path) -> str:
    try:
        n = p.stat().st_size
    except OSError:
        return "?"
    return f"{n} bytes" if n < 10_000 else f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def folder_kind(folder: Path | str) -> Optional[str]:
    """``"run"``, ``"hiddenbench run"`` or None: the kind of output ``folder`` already holds."""
    folder = Path(folder)
    for kind, names in OUTPUT_KINDS.items():
        if any(os.path.exists(folder / n) for n in names):
            return kind
    return None


def describe_folder(folder: Path | str) -> str:
    """What an output folder holds, in a few words (its files and sizes, the header's run)."""
    folder = Path(folder)
    found = [f"{n} ({_size(folder / n)})" for names in OUTPUT_KINDS.values() for n in names if os.path.exists(folder / n)]
    header = {}
    for name in ("run.json", "hiddenbench_run.json"):  # the first that reads as JSON
        with contextlib.suppress(OSError, ValueError, RecursionError), open(folder / name, "rb") as fh:
            header = json.loads(fh.read(4 << 20))
            break
    what = ""
    if isinstance(header, dict) and header:
        what = (f": {header.get('rows', '?')} decisions by {header.get('backend', '?')} "
                f"({header.get('model', '?')}), created {header.get('created', '?')}")
    return (", ".join(found) or "files") + what


#: What an output folder of each kind may hold besides its :data:`OUTPUT_KINDS` files (hidden entries, such as the
#: lock and a killed write's temporary files, are always the suite's or the system's).
OWN_ENTRIES = {"run": ("results.parquet", "run.json"),
               "hiddenbench run": ("hiddenbench_run.json", "hiddenbench_controlled.parquet",
                                   "hiddenbench_natural_decisions.parquet", "artefacts"),
               "book": ("_config.yml", "_toc.yml", "references.bib", "book", "runs", "_build")}


def other_files(folder: Path | str, kind: str) -> list[str]:
    """The entries of ``folder`` that an output of ``kind`` would not have put there (not hidden), sorted."""
    own = set(OWN_ENTRIES.get(kind, ()))
    if kind == "hiddenbench run":
        own |= {n for n in _listdir(folder) if n.startswith("hiddenbench_") and n.endswith(".parquet")}
    return sorted(n for n in _listdir(folder) if not n.startswith(".") and n not in own)


def _listdir(folder) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def check_other_files(folder: Path | str, kind: str, allowed: bool, option: str = "--out",
                      flag: str = "--allow-other-files") -> None:
    """Refuse (:class:`WouldDestroy`) writing a ``kind`` into an existing folder that holds files of something else
    (a home folder, a source tree: the output would mix with them), unless ``allowed`` (the explicit ``flag``)."""
    others = other_files(folder, kind) if Path(folder).is_dir() else []
    if others and not allowed:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise WouldDestroy(f"{option} {folder}: holds {len(others)} file(s) or folder(s) that are not a {kind}'s "
                           f"({shown}); a {kind} would mix with them. Choose a new or empty folder, or add {flag} to "
                           f"write there anyway (rule: an output folder holds one output and nothing else)")


def check_output_folder(folder: Path | str, kind: str, inputs: Iterable[Path | str] = (),
                        same_work: Optional[Callable[[Path], list[str]]] = None, overwrite: bool = False,
                        option: str = "--out", allow_other_files: bool = False) -> None:
    """Refuse (:class:`WouldDestroy`) ``folder`` when it is or lies in an input folder or is an input
    file's folder, or holds output of another kind (never allowed), or holds output of this ``kind`` that
    ``same_work(folder)`` says differs (allowed with ``overwrite``), or holds no output yet but files of
    something else (allowed with ``allow_other_files``: :func:`check_other_files`)."""
    folder = Path(folder)
    here = _real(folder)
    for p in inputs:
        src = _real(p)
        is_dir = os.path.isdir(src)
        src_dir = src if is_dir else os.path.dirname(src)
        if (_inside(here, src_dir) if is_dir else here == src_dir):
            raise WouldDestroy(f"{option} {folder}: is {'the' if here == src_dir else 'inside the'} folder "
                               f"{src_dir} that this command reads ({p}); write the output to a folder of its own "
                               f"(rule: an output folder is never an input folder, nor the folder of an input file)")
    other = folder_kind(folder)
    if other is None:
        check_other_files(folder, kind, allow_other_files, option)
    if other is not None and other != kind:
        raise WouldDestroy(f"{option} {folder}: holds a {other} ({describe_folder(folder)}); a {kind} would mix "
                           f"with it in one folder (rule: one kind of run per folder; choose another {option})")
    if other == kind and same_work is not None and not overwrite:
        diffs = same_work(folder)
        if diffs:
            raise WouldDestroy(f"{option} {folder}: holds a finished {kind} ({describe_folder(folder)}) that this "
                               f"command would replace: {'; '.join(diffs)[:600]}. Choose another {option}, or add "
                               f"--overwrite to replace it (rule: no command destroys existing work without an "
                               f"explicit flag)")


def check_output_file(dest: Path | str, inputs: Iterable[Path | str] = (), overwrite: bool = False,
                      option: str = "OUT") -> None:
    """Refuse (:class:`WouldDestroy`) an output file that is an input (never allowed), a folder, an
    existing non-empty file (allowed with ``overwrite``) or in a folder that cannot be written."""
    dest = Path(dest)
    problem = path_problem(dest)
    if problem:
        raise WouldDestroy(f"{option} {dest}: {problem}")
    here = _real(dest)
    for p in inputs:
        if here == _real(p):
            raise WouldDestroy(f"{option} {dest}: is the file this command reads ({p}); writing there would destroy "
                               f"it (rule: an output never replaces the command's input)")
    if os.path.isdir(here):
        raise WouldDestroy(f"{option} {dest}: is a folder; name a file (e.g. {dest}/calls.jsonl)")
    if os.path.exists(here):
        if not os.path.isfile(here):
            raise WouldDestroy(f"{option} {dest}: exists and is not a regular file")
        if not overwrite and os.path.getsize(here) > 0:
            raise WouldDestroy(f"{option} {dest}: exists ({_size(dest)}); add --overwrite to replace it (rule: no "
                               f"command destroys existing work without an explicit flag)")
    parent = Path(os.path.dirname(here) or ".")
    if not parent.is_dir():
        raise WouldDestroy(f"{option} {dest}: its folder {parent} does not exist")
    try:
        _probe(parent)
    except OSError as e:
        raise WouldDestroy(f"{option} {dest}: its folder {parent} is not writable ({_why(e)})") from None
