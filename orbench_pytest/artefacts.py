"""Writing report files (results JSON, Markdown) without harming what is already there.

Atomic (a temp file, then os.replace) so a reader never sees half a file. But the path a
user gives may be a symlink (written through: the link stays, its target is replaced) or a
special file such as a device or a FIFO (refused: replacing /dev/something with JSON, as
root, would be a disaster). The file gets the permissions of any other build artefact
(0666 less the umask, or those of the file it replaces), not mkstemp's private 0600.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .errors import ConfigError


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
    return _mode_for(target)


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomically(path: Path, write: Callable[[TextIO], None], option: str) -> None:
    """Call `write` on a temp file beside the real target, then put it in place."""
    target = resolved_target(path, option)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    try:
        os.fchmod(handle, _mode_for(target))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            write(out)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
