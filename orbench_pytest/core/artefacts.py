"""Writing files atomically, and report files (results JSON, Markdown) without harming what
is already there.

`replacing(target)` is the package's one atomic write: a temporary path beside the target,
put in its place (os.replace) when the block ends and removed when it fails, so a reader
never sees half a file (the cache merge, downloads, the local model's assembly, the batch
state, the xdist hand-off and generate's files all write through it).

Reports are atomic too (a temp file, then os.replace). But the path a
user gives may be a symlink (written through: the link stays, its target is replaced) or a
special file such as a device or a FIFO (refused: replacing /dev/something with JSON, as
root, would be a disaster). The file gets the permissions of any other build artefact
(0666 less the umask, or those of the file it replaces), not mkstemp's private 0600.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from orbench_pytest.core.errors import ConfigError


@contextmanager
def replacing(target: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A fresh path beside `target` (not yet created: a file or an SQLite database may be
    made there) that replaces `target` when the block ends without an error; on an error it
    is removed and `target` is left as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}")
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    """The file's sha256 in hex, read in blocks (a dataset may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def replace_text(target: Path, text: str) -> None:
    """Write `text` (UTF-8) to `target` atomically."""
    with replacing(target) as temporary:
        temporary.write_text(text, encoding="utf-8")


def resolved_target(path: Path, option: str) -> Path:
    """The regular file that writing `path` would replace (through any symlinks)."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # the parent check names the cause
        return target
    except OSError as exc:
        raise ConfigError(f"{option}: cannot write {path} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{option}: {path} is a folder; give a file name")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{option}: {path} is not a regular file (a device, FIFO or "
                          "socket); give a file name")
    return target


def mode_for(target: Path) -> int:
    """The permissions a new artefact at `target` gets (those of the file it replaces)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_new_file(path: Path, mode: int, write: Callable[[TextIO], object]) -> None:
    """Call `write` on a new file at `path`: created private (0600), then given `mode` (an
    artefact's permissions) before any byte."""
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(handle, mode)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        write(out)


def write_atomically(path: Path, write: Callable[[TextIO], object], option: str) -> None:
    """Call `write` on a temp file beside the real target, then put it in place."""
    target = resolved_target(path, option)
    mode = mode_for(target)
    try:
        with replacing(target) as temporary:
            write_new_file(temporary, mode, write)
    except OSError as exc:  # a full disk, a folder not writable: the file named, left as it was
        raise ConfigError(f"{option}: cannot write {path} ({exc.strerror or exc})") from None
