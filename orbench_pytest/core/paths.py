"""Where orbench keeps its files: the cache folder and the data folders, from the
environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """$ORBENCH_CACHE_DIR, else $XDG_CACHE_HOME/orbench-pytest, else ~/.cache/orbench-pytest."""
    env = os.environ if env is None else env
    configured = env.get("ORBENCH_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "orbench-pytest"


def data_dirs_from_env(env: Mapping[str, str]) -> tuple[Path, ...]:
    """$ORBENCH_DATA_DIR: folders separated like $PATH (':' on POSIX, ';' on Windows)."""
    parts = (env.get("ORBENCH_DATA_DIR") or "").split(os.pathsep)
    return tuple(Path(part).expanduser() for part in parts if part.strip())
