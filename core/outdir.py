"""Writing the output folder of the offline tools (``tools.plan --out DIR``, ``tools.report --out DIR``).

One home for it, because the folder is the user's: it may hold their own files, a planted symbolic link,
or be no folder at all (a file, ``/dev/null``, something under ``/proc``). So the folder is checked
before anything is written; every destination is checked before the first byte is written (all or
nothing); each file is written atomically (a temporary file in the same folder, then ``os.replace``,
which replaces a name and never writes through it); a symbolic link inside the folder is never followed,
and the tool refuses rather than deletes. A folder the tool owns (``manifests/``) is kept free of stale
files from earlier runs, but only of files the tool wrote: ``DIR/.tpu-rl-written`` records what each
run wrote and its SHA-256, and a file is removed only while it is a regular file with those bytes. A
user's own file, or one they edited, stays. Every failure is one line (``OutputError``); the caller
exits with 2.

Not covered: an attacker racing the tool (swapping a folder for a link between the check and the write).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path, PurePosixPath

from core.errors import BadInputError
from core.inputs import InputError, read_file

MARKER = ".tpu-rl-written"
"""The record, in the output folder, of the files the last runs wrote (relative path → SHA-256)."""

MAX_MARKER_BYTES = 1 << 20
"""A record of a few hundred paths is a few tens of kilobytes."""

MAX_STALE_BYTES = 64 << 20
"""A stale file larger than this is not read to compare it, so it is kept."""

SYSTEM_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
"""Folders of the kernel and devices: never an output folder."""


class OutputError(BadInputError):
    """The output folder or one of its files cannot be written (one line naming the path and the fix)."""


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()
"""What ``open`` would give a new file (``mkstemp`` creates them 0600); read once, at import."""


def _kind(mode: int) -> str:
    """What a file is, for a message."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _lstat(path: Path, shown: Path | str) -> os.stat_result | None:
    """``lstat``, or None when nothing is there; ``shown`` is the path as the user named it."""
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise OutputError(f"cannot check {shown} ({err.strerror or err}): pick a folder you can write to") from None


def check(out: Path) -> Path:
    """``prepare``'s checks without creating anything (a CLI checks ``--out`` before it does any work): a
    missing folder must be creatable under its nearest existing parent."""
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a loop of symbolic links (Python 3.11)
        why = getattr(err, "strerror", None) or err
        raise OutputError(f"--out {out} cannot be resolved ({why}): pick a folder") from None
    if _lstat(out, f"--out {out}") is not None:
        return prepare(out)
    for root in SYSTEM_ROOTS:
        if Path(os.path.abspath(out)).is_relative_to(root) or resolved.is_relative_to(root):
            raise OutputError(f"--out {out} is under {root}, a system folder: pick a folder of your own")
    parent = resolved.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"--out {out} cannot be created (Not a directory): pick a folder you can write to")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out} cannot be created (Permission denied): pick a folder you can write to")
    return resolved


def prepare(out: Path) -> Path:
    """The resolved output folder, created (parents too) if missing; refuses a file, a device, a FIFO, a
    link to anything but a folder, a folder under /proc, /sys or /dev, and a folder it cannot write."""
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a loop of symbolic links (Python 3.11)
        why = getattr(err, "strerror", None) or err
        raise OutputError(f"--out {out} cannot be resolved ({why}): pick a folder") from None
    for root in SYSTEM_ROOTS:
        if Path(os.path.abspath(out)).is_relative_to(root) or resolved.is_relative_to(root):
            raise OutputError(f"--out {out} is under {root}, a system folder: pick a folder of your own")
    link = _lstat(out, f"--out {out}")
    if link is not None:
        try:
            target = out.stat()
        except FileNotFoundError:
            raise OutputError(f"--out {out} is a symbolic link to nothing: remove it or pick a folder") from None
        except OSError as err:
            why = err.strerror or err
            raise OutputError(f"cannot check --out {out} ({why}): pick a folder you can write to") from None
        if not stat.S_ISDIR(target.st_mode):
            kind = _kind(target.st_mode)
            if stat.S_ISLNK(link.st_mode):
                kind = f"a symbolic link to {kind}"
            raise OutputError(f"--out {out} is {kind}, not a folder: pick a folder (it is created if missing)")
    else:
        try:
            resolved.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            why = err.strerror or err
            raise OutputError(f"--out {out} cannot be created ({why}): pick a folder you can write to") from None
    if not os.access(resolved, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out} is not writable: pick a folder you can write to")
    return resolved


def _relative(name: str, out: Path) -> PurePosixPath:
    """``name`` as a path that stays inside the output folder (no ``..``, not absolute, not empty)."""
    rel = PurePosixPath(name)
    if not rel.parts or rel.is_absolute() or ".." in rel.parts or "\0" in name:
        raise OutputError(f"cannot write {name!r} in --out {out}: the path must be relative and stay inside it")
    return rel


def _check_folders(out: Path, shown: Path, rel: PurePosixPath) -> None:
    """Every folder of ``rel`` inside the output folder is a real folder (not a link) or missing."""
    for depth in range(1, len(rel.parts) + 1):
        where = shown.joinpath(*rel.parts[:depth])
        info = _lstat(out.joinpath(*rel.parts[:depth]), where)
        if info is None:
            return
        if not stat.S_ISDIR(info.st_mode):
            if stat.S_ISLNK(info.st_mode):
                raise OutputError(
                    f"{where} is a symbolic link: remove it or pick another --out (links in it are never followed)"
                )
            raise OutputError(f"{where} is {_kind(info.st_mode)}, not a folder: remove it or pick another --out")


def _check_file(out: Path, shown: Path, rel: PurePosixPath) -> None:
    """``rel`` can be replaced: its folders are real folders, and it is missing or a regular file."""
    _check_folders(out, shown, rel.parent)
    info = _lstat(out / rel, shown / rel)
    if info is None or stat.S_ISREG(info.st_mode):
        return
    if stat.S_ISLNK(info.st_mode):
        raise OutputError(
            f"{shown / rel} is a symbolic link: remove it or pick another --out (links in it are never followed)"
        )
    raise OutputError(f"{shown / rel} is {_kind(info.st_mode)}, not a file: remove it or pick another --out")


def _read_record(out: Path) -> dict[str, str]:
    """What earlier runs wrote (relative path → SHA-256); an unreadable or foreign record is empty, so
    nothing is removed on its word."""
    try:
        data = json.loads(read_file(out / MARKER, MAX_MARKER_BYTES))
    except (InputError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _write(out: Path, shown: Path, rel: PurePosixPath, data: bytes) -> None:
    """``data`` at ``rel``, atomically: a temporary file next to it, then ``os.replace``."""
    folder = out / rel.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{rel.name}.", suffix=".tmp")
    except OSError as err:
        raise OutputError(f"cannot write {shown / rel}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as file:
            os.fchmod(file.fileno(), _FILE_MODE)
            file.write(data)
        os.replace(temp, out / rel)
    except OSError as err:
        Path(temp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {shown / rel}: {err.strerror or err}") from None


def _remove_stale(out: Path, shown: Path, rel: PurePosixPath, digest: str) -> None:
    """Removes ``rel`` if it still is a regular file, reached through real folders, holding the bytes an
    earlier run wrote; anything else (missing, a link, changed, too large to compare) is left alone."""
    try:
        _check_file(out, shown, rel)
        if hashlib.sha256(read_file(out / rel, MAX_STALE_BYTES)).hexdigest() != digest:
            return
    except (OutputError, InputError):
        return
    try:
        (out / rel).unlink()
    except FileNotFoundError:
        pass
    except OSError as err:
        raise OutputError(f"cannot remove {shown / rel} (written by an earlier run): {err.strerror or err}") from None


def write_files(out: Path, files: dict[str, bytes | str], *, owned: str | None = None) -> None:
    """Writes ``files`` (relative path → content; text as UTF-8) into the output folder ``out`` (``prepare``
    checks it first), all or nothing as far as checks go; with ``owned`` (a subfolder, e.g. ``"manifests"``),
    files in it that an earlier run wrote and this one does not are removed, if unchanged since."""
    root = prepare(out)
    names = {_relative(name, out): name for name in files}
    owned_rel = _relative(owned, out) if owned is not None else None
    folders = {parent for rel in names for parent in rel.parents}
    for rel, name in names.items():
        if rel in folders:
            raise OutputError(f"cannot write {name!r} in --out {out}: it is also the folder of another file")
        if rel == PurePosixPath(MARKER):
            raise OutputError(f"cannot write {name!r} in --out {out}: the name is tpu-rl's record of its files")
    for rel in names:
        _check_file(root, out, rel)
    if owned_rel is not None:
        _check_folders(root, out, owned_rel)
    _check_file(root, out, PurePosixPath(MARKER))

    earlier = _read_record(root)
    written: dict[str, str] = {}
    for rel, name in names.items():
        content = files[name]
        data = content.encode() if isinstance(content, str) else content
        _write(root, out, rel, data)
        written[rel.as_posix()] = hashlib.sha256(data).hexdigest()
    for name, digest in sorted(earlier.items()):
        if name in written:
            continue
        try:
            rel = _relative(name, out)
        except OutputError:
            continue  # not a name this module writes: forgotten
        if owned_rel is not None and owned_rel in rel.parents:
            _remove_stale(root, out, rel, digest)  # removed, or the user's now: no longer recorded
        elif (info := _lstat(root / rel, out / rel)) is not None and stat.S_ISREG(info.st_mode):
            written[name] = digest  # outside the owned folder (another tool's, say): still recorded
    record = json.dumps({"files": dict(sorted(written.items()))}, indent=2) + "\n"
    _write(root, out, PurePosixPath(MARKER), record.encode())
