"""The parsers an option row carries (options.py): raw value in, typed value out, or a one-line
ConfigError naming the option as typed.

A parser is called as `parse(raw, option, here)`: `raw` is the command line's or the ini file's
value, or the row's default when neither set it (None when the row has none); `option` is the
flag its errors name; `here` the folder relative paths are read from. Every pytest start imports
this module with the table, so it imports only what pytest has loaded already; the modules a
value needs (errors, YAML, URLs) are imported when a value is parsed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from orbench_pytest.core import defaults

Parser = Callable[[Any, str, Path], Any]



def _fail(message: str) -> NoReturn:
    from orbench_pytest.core.errors import ConfigError

    raise ConfigError(message)


def _shown(raw: Any) -> str:
    from orbench_pytest.core.untrusted import terminal_text

    return terminal_text(repr(raw), 60)


def text(raw: Any, option: str, here: Path) -> str | None:
    """A value taken as typed (a model name, a MODULE:FUNCTION)."""
    return None if raw is None else str(raw)


def model_name(raw: Any, option: str, here: Path) -> str | None:
    if raw is not None and not str(raw).strip():
        _fail(f"{option}: empty; give a model name, or local")
    return text(raw, option, here)


def flag(raw: Any, option: str, here: Path) -> bool:
    return bool(raw)


def texts(raw: Any, option: str, here: Path) -> tuple[str, ...]:
    """A repeatable value: every one given, in order."""
    return tuple(str(item) for item in raw or ())


def url(raw: Any, option: str, here: Path) -> str | None:
    """An http(s) endpoint, normalised (a trailing / must not miss the cache)."""
    if raw is None:
        return None
    from orbench_pytest.fetch.endpoints import validate_base_url

    return validate_base_url(str(raw), option)


def env_name(raw: Any, option: str, here: Path) -> str | None:
    """The NAME of a variable; never echo the value, which may be a key pasted by mistake."""
    if raw is None:
        return None
    from orbench_pytest.core.ids import ENV_NAME

    if not ENV_NAME.match(str(raw)):
        _fail(f"{option}: expects the name of an environment variable (letters, digits, '_'), "
              "not the key itself; the value is not shown")
    return str(raw)


def version(raw: Any, option: str, here: Path) -> str | None:
    """One printable line, e.g. an image digest or a commit SHA (the value is not echoed: it
    may be anything pasted)."""
    if raw is None:
        return None
    value = str(raw).strip()
    if not value or len(value) > defaults.MAX_VERSION_CHARS or not value.isprintable():
        _fail(f"{option}: expects one printable line of 1 to {defaults.MAX_VERSION_CHARS} "
              "characters (an image digest, a deployment id, a commit SHA)")
    return value


def choice(*allowed: str, blank_is_first: bool = False) -> Parser:
    """One of `allowed`; unset is None. With `blank_is_first`, an empty value is the first
    allowed (the row's default)."""
    def parse(raw: Any, option: str, here: Path) -> str | None:
        if raw is None:
            return None
        if blank_is_first and raw == "":
            return allowed[0]
        if raw not in allowed:
            _fail(f"{option}: {raw!r} is not allowed (allowed: {', '.join(allowed)})")
        return str(raw)
    return parse


def is_choice(yes: str, no: str) -> Parser:
    """A two-way choice read as a bool: True for `yes`."""
    pick = choice(yes, no)

    def parse(raw: Any, option: str, here: Path) -> bool | None:
        picked = pick(raw, option, here)
        return None if picked is None else picked == yes
    return parse


def number(low: float, high: float | None = None, unit: str = "") -> Parser:
    """A finite number from `low` (to `high`); unset is None."""
    def parse(raw: Any, option: str, here: Path) -> float | None:
        if raw is None:
            return None
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = float("nan")
        if not (math.isfinite(value) and value >= low and (high is None or value <= high)):
            bound = (f"between {low:g} and {high:g}" if high is not None
                     else f"at least {low:g} (and finite)")
            _fail(f"{option}: {raw!r} is not a number {bound}{unit}")
        return value + 0.0  # -0 is 0: one cache key, one way to print it
    return parse


_WHOLE = re.compile(r"[+-]?[0-9]{1,30}")  # ASCII digits only: no 1_0, no ٣, no 10**99


def whole(low: int = 1, high: int | None = None) -> Parser:
    """A whole number from `low` (to `high`); unset is None."""
    def parse(raw: Any, option: str, here: Path) -> int | None:
        if raw is None:
            return None
        text = str(raw).strip()
        bound = f">= {low}" if high is None else f"from {low} to {high:,}"
        value = int(text) if _WHOLE.fullmatch(text) else None
        if value is None or value < low or (high is not None and value > high):
            _fail(f"{option}: {_shown(raw)} is not a whole number {bound}")
        return value
    return parse


def kinds(*known: str) -> Parser:
    """Some of `known`, comma-separated, kept in `known`'s order (the report's), each once."""
    def parse(raw: Any, option: str, here: Path) -> tuple[str, ...] | None:
        if raw is None:
            return None
        given = [part.strip() for part in str(raw).split(",")]
        unknown = [part for part in given if part not in known]
        if unknown or not any(given):
            _fail(f"{option}: {_shown(raw)} is not a comma-separated list of {', '.join(known)}")
        return tuple(kind for kind in known if kind in given)
    return parse


def output_path(raw: Any, option: str, here: Path) -> Path | None:
    """A file the run writes; empty is unset."""
    return here / str(raw) if raw else None


def existing_file(raw: Any, option: str, here: Path) -> Path | None:
    """A regular file the run reads."""
    if raw is None:
        return None
    from orbench_pytest.core.bounded import existing_file as checked

    return checked(here / str(raw), option)


def existing_files(raw: Any, option: str, here: Path) -> tuple[Path, ...]:
    return tuple(path for item in raw or () if (path := existing_file(item, option, here)))


def folders(raw: Any, option: str, here: Path) -> tuple[Path, ...]:
    """Folders the run only reads (never creates): one that is not there is a mistake."""
    import stat

    from orbench_pytest.core.paths import stat_of

    found = []
    for item in raw or ():
        path = here / str(item)
        info = stat_of(path, option)
        if info is None or not stat.S_ISDIR(info.st_mode):
            _fail(f"{option}: {path} is not a folder; give an existing folder of "
                  "pre-downloaded data files (it is read, never created)")
        found.append(path)
    return tuple(found)


def preamble(raw: Any, option: str, here: Path) -> Any:
    """A YAML conversation file, loaded (core.conversation.Preamble)."""
    path = existing_file(raw, option, here)
    if path is None:
        return None
    from orbench_pytest.core.conversation import load_preamble

    return load_preamble(path)


def subset(raw: Any, option: str, here: Path) -> int | float | None:
    if raw is None:
        return None
    from orbench_pytest.catalog.sampling import parse_sample

    return parse_sample(str(raw), option)


def shard(raw: Any, option: str, here: Path) -> Any:
    if raw is None:
        return None
    from orbench_pytest.catalog.shards import parse_shard

    return parse_shard(raw)


def max_age(raw: Any, option: str, here: Path) -> float | None:
    """Seconds; None is no limit (an unset value is the row's default, never None here)."""
    from orbench_pytest.fetch.freshness import parse_max_age

    return parse_max_age(raw, option)
