"""Resolving a path the user gave: a symlink loop or an unusable component is a one-line
error naming the path, never a RuntimeError or OSError traceback."""

from __future__ import annotations

import os
from pathlib import Path

from orbench_pytest.core.errors import ConfigError


def resolved(path: Path, what: str = "") -> Path:
    """`path.resolve()`, or a ConfigError naming `what` (an option, a role) and the path.

    Python 3.11 raises RuntimeError on a symlink loop; an unreadable folder (EACCES) or an
    over-long name (ENAMETOOLONG) raise OSError."""
    try:
        return path.resolve()
    except RuntimeError:
        reason = "a symlink loop"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    prefix = f"{what}: " if what else ""
    raise ConfigError(f"{prefix}{path}: cannot follow the path ({reason}); give a file or "
                      "folder that exists")


def stat_of(path: Path, what: str = "") -> os.stat_result | None:
    """`os.stat(path)`, None where nothing is there; a path that cannot be looked at (a symlink
    loop, an over-long name, a folder without access) is a ConfigError naming it, where
    Path.is_file() and exists() would raise or answer False silently."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path (a TOML "\u0000")
        prefix = f"{what}: " if what else ""
        raise ConfigError(f"{prefix}{path}: cannot look at the path "
                          f"({getattr(exc, 'strerror', None) or exc}); "
                          "give a file or folder that exists") from None
