"""Bounded reads of files a contributor controls: a suite, a thresholds file, an option's
@FILE. A small input must not exhaust memory (/dev/zero, a FIFO, a huge file): at most
`limit` bytes are read, and a larger input is a one-line ConfigError naming the file.
Replies and answers are bounded too: a reply by bytes read, an answer by characters kept."""

from __future__ import annotations

import csv
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from orbench_pytest.core.errors import ConfigError, OrbenchError

KIB = 1024
MIB = 1024 * KIB
OPTION_FILE_LIMIT = 1 * MIB  # a system prompt
THRESHOLDS_LIMIT = 1 * MIB
SUITE_LIMIT = 64 * MIB  # inline suites of tens of thousands of prompts fit
DATA_FILE_LIMIT = 64 * MIB  # a suite's source (CSV, JSONL, Parquet): OR-Bench-80K is ~12 MB
RESULTS_LIMIT = 1024 * MIB  # a results file or JUnit XML of an 80K-prompt run fits
PROMPT_LIMIT = 131_072  # characters of one prompt (the csv module's own field limit)


def _size_text(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB else f"{limit // KIB} KiB"


def _not_regular(mode: int) -> str | None:
    """What a path that is not a regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")


def _refused(path: Path, verb: str, what: str, kind: str) -> ConfigError:
    return ConfigError(f"{path}: cannot {verb}{what} ({kind}, not a regular file)")


def regular_file(path: Path, what: str = "", verb: str = "read") -> os.stat_result | None:
    """The file's stat, None where nothing is there; a folder, device, FIFO or socket (or a
    path that cannot be looked at) is a one-line ConfigError ("{path}: cannot {verb}{what}
    (a FIFO, not a regular file)") before anything opens it, where Path.is_file() would answer
    False and the file be silently taken as absent."""
    shown = f" {what}" if what else ""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path (a TOML "\u0000")
        raise ConfigError(f"{path}: cannot {verb}{shown} "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    kind = _not_regular(found.st_mode)
    if kind is not None:
        raise _refused(path, verb, shown, kind)
    return found


def existing_file(path: Path, option: str) -> Path:
    """`path`, given by `option`, where it is a regular file: a missing one, a folder, a device,
    a FIFO or a socket is a one-line ConfigError naming the option (`--seeds: x.csv: file not
    found`)."""
    try:
        found = regular_file(path)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None
    if found is None:
        raise ConfigError(f"{option}: {path}: file not found")
    return path


_NON_BLOCKING = getattr(os, "O_NONBLOCK", 0)  # POSIX; Windows has no FIFOs to open


def open_regular(path: Path, what: str = "") -> BinaryIO:
    """`path` opened to read bytes, where it is a regular file; a folder, a device, a FIFO or
    a socket is a one-line ConfigError, refused before it is opened (a device is not touched)
    and again once opened (a FIFO swapped in meanwhile opens non-blocking, so nothing hangs)."""
    shown = f" {what}" if what else ""
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind is None:
            fd = os.open(path, os.O_RDONLY | _NON_BLOCKING | getattr(os, "O_BINARY", 0))
            kind = _not_regular(os.fstat(fd).st_mode)
            if kind is None:
                if _NON_BLOCKING:
                    os.set_blocking(fd, True)
                return os.fdopen(fd, "rb")
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read{shown} ({exc.strerror or exc})") from None
    raise _refused(path, "read", shown, kind)


def read_bytes(path: Path, limit: int, what: str = "") -> bytes:
    """The file's bytes, at most `limit`, through open_regular: nothing blocks or streams
    forever."""
    with open_regular(path, what) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read{f' {what}' if what else ''} "
                              f"({exc.strerror or exc})") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: cannot read{f' {what}' if what else ''} (larger than the "
                          f"{_size_text(limit)} allowed)")
    return data


def read_text(path: Path, limit: int, what: str = "") -> str:
    """As read_bytes, decoded as UTF-8 (a byte-order mark is dropped)."""
    data = read_bytes(path, limit, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


# --- answers ---------------------------------------------------------------------------------
BODY_LIMIT = 8 * MIB  # one HTTP reply, after decompression (a small gzip body can inflate)
ANSWER_CHARS = 200_000  # far above any answer a judge needs; what is kept of a longer one
RAW_CHARS = 16 * KIB  # the raw body kept beside an answer, for debugging
FLIP_ANSWER_CHARS = 8 * KIB  # of a rewording's refused answer in the results file: whole at
# any usual max_tokens (the embedded model's 128 tokens: under 1,000 characters)


class BodyTooLarge(OrbenchError):
    """A reply larger than BODY_LIMIT: reading stopped there."""


async def read_body(content: Any, limit: int = BODY_LIMIT) -> bytes:
    """An aiohttp response stream, decompressed, read to at most `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_chunked(64 * KIB):
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"reply larger than {_size_text(limit)} (stopped reading)")
        chunks.append(chunk)
    return b"".join(chunks)


def clip_answer(text: str | None, limit: int = ANSWER_CHARS) -> str | None:
    """An answer cut to `limit` characters, the cut recorded in the text itself (so the cache,
    the results and the reports all show it)."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f" [orbench: answer truncated at {limit:,} of {len(text):,} characters]"


def clip_raw(text: str | None) -> str | None:
    if text is None or len(text) <= RAW_CHARS:
        return text
    return text[:RAW_CHARS] + f" [orbench: {len(text):,} characters, truncated]"


@contextmanager
def csv_field_limit(chars: int) -> Iterator[None]:
    """The csv module's field limit (process-wide, 131,072 by default) raised to `chars` while
    one file is read, then put back: what a file may hold never depends on what the process
    read before."""
    before = csv.field_size_limit(max(csv.field_size_limit(), chars))
    try:
        yield
    finally:
        csv.field_size_limit(before)
