"""The response cache's file: its schema, the checks that a file is ours (a crafted one must
not hang or hijack a run), and opening it (`open_cache`). What is stored and looked up in it:
cache.py (reading) and cache_write.py (writing).
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved, stat_of
from orbench_pytest.core.untrusted import terminal_text

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT,
    finish_reason TEXT,
    content_filter INTEGER NOT NULL DEFAULT 0,
    refusal TEXT,
    reasoning TEXT,
    usage TEXT,
    latency_ms REAL,
    raw TEXT,
    created REAL,
    system_fingerprint TEXT
);
"""


# Created on every writable open: a cache file from before the table gains it.
_JUDGMENTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    reason TEXT NOT NULL,
    confident INTEGER NOT NULL,
    judge TEXT NOT NULL,
    created REAL
);
"""
JUDGMENT_COLUMNS = ("key", "label", "reason", "confident", "judge", "created")
OWN_TABLES = frozenset({"responses", "judgments", "run_errors", "run_state"})

# Added to the responses table after its first release: an older file has none (unknown).
LATER_COLUMNS = frozenset({"system_fingerprint"})
RESPONSE_COLUMNS = frozenset({"key", "text", "finish_reason", "content_filter", "refusal",
                              "reasoning", "usage", "latency_ms", "raw", "created"})

# Bounds on what a cache file can cost (a crafted file must not hang a run):
QUERY_LIMIT_S = 30.0  # one statement (a lookup chunk, a count, a merge step) at most
WRITE_ATTEMPT_S = 0.05  # during the fetch, one write attempt blocks the event loop at most this

# The storage classes a row of ours may hold, per column (SQLite's typeof()); a row with any
# other (a text `created`, a binary `text`, edited or crafted) is corrupt: never read, never
# merged.
_TEXT = ("text", "null")
_NUMBER = ("integer", "real", "null")
RESPONSE_TYPES: dict[str, tuple[str, ...]] = {
    "key": ("text",), "text": _TEXT, "finish_reason": _TEXT, "content_filter": ("integer",),
    "refusal": _TEXT, "reasoning": _TEXT, "usage": _TEXT, "latency_ms": _NUMBER, "raw": _TEXT,
    "created": _NUMBER, "system_fingerprint": _TEXT,
}
JUDGMENT_TYPES: dict[str, tuple[str, ...]] = {
    "key": ("text",), "label": ("text",), "reason": ("text",), "confident": ("integer",),
    "judge": ("text",), "created": _NUMBER,
}


def well_typed(types: dict[str, tuple[str, ...]], columns: Iterable[str],
               table: str | None = None) -> str:
    """An SQL condition true of the rows whose columns hold the storage classes of ours
    (`columns`: those the table has)."""
    prefix = f"{table}." if table else ""
    return " AND ".join(f"typeof({prefix}{c}) IN ({', '.join(repr(t) for t in types[c])})"
                        for c in columns if c in types)


def cache_error(path: Path, exc: sqlite3.DatabaseError, lock_wait_s: float) -> ConfigError:
    """A one-line error that advises deleting the file only when it is really damaged."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return ConfigError(f"{path}: the response cache is locked by another process (waited "
                           f"{lock_wait_s:g} s); let that run finish, or pass "
                           "--orbench-cache-path=OTHER")
    if interrupted(exc):
        return ConfigError(f"{path}: a query on the response cache ran past {QUERY_LIMIT_S:g} s "
                           "(a crafted or damaged file?); delete it or pass "
                           "--orbench-cache-path=NEW")
    if isinstance(exc, sqlite3.OperationalError) and "readonly" in text.replace("-", ""):
        return ConfigError(f"{path}: the response cache is read-only here ({text}); "
                           "use --orbench-cache=read or --orbench-cache-path=OTHER")
    if not _is_sqlite_file(path):  # the user's own file, named by mistake: never advise deleting it
        return ConfigError(f"{path}: not an orbench response cache (not an SQLite file); it is "
                           "left as it is: pass --orbench-cache-path=NEW for a cache of its own")
    return ConfigError(f"{path}: the response cache is unreadable ({text}); delete it to "
                       "start afresh (answers in it will be fetched again)")


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def _is_sqlite_file(path: Path) -> bool:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # never open a FIFO or a device
            return False
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _drop_orphan_journals(path: Path) -> None:
    """A deleted cache's leftover -wal/-shm files would be replayed into the new file and
    fail it ("disk I/O error"); without their database they hold nothing worth keeping."""
    if path.exists():
        return
    for journal in journal_files(path):
        journal.unlink(missing_ok=True)


def tables_of(db: sqlite3.Connection, schema: str = "main") -> set[str]:
    """The table names of one database of a connection (`main`, or an attached one)."""
    return {row[0] for row in db.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'")}


def columns_of(db: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    """A table's column names, in their order."""
    return [row[1] for row in db.execute(f"PRAGMA {schema}.table_info({table})")]


def check_structure(db: sqlite3.Connection, path: Path, schema: str = "main") -> None:
    """Only our tables (and their indexes) may be in the file: a view, a trigger or another
    program's table named like ours could run any query (an endless recursive CTE) when read.
    Read from sqlite_master alone, so this costs nothing and cannot hang."""
    for kind, name, table in db.execute(
            f"SELECT type, name, tbl_name FROM {schema}.sqlite_master"):
        if (kind == "table" and name in OWN_TABLES) or (kind == "index" and table in OWN_TABLES):
            continue
        raise ConfigError(f"{path}: not an orbench response cache (it holds the {kind} "
                          f"{terminal_text(repr(name), 80)}); pass --orbench-cache-path=NEW")


class QueryClock:
    """A progress handler that interrupts a statement running past QUERY_LIMIT_S: no cache
    file, however crafted, holds a run longer than that per statement."""

    def __init__(self, limit_s: float = QUERY_LIMIT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s = limit_s
        self.clock = clock
        self.deadline = math.inf
        self.fired = False

    def attach(self, db: sqlite3.Connection) -> None:
        db.set_progress_handler(self._over, 10_000)

    def start(self) -> None:
        self.deadline = self.clock() + self.limit_s
        self.fired = False

    def _over(self) -> int:
        if self.clock() > self.deadline:
            self.fired = True
            return 1
        return 0

    def check(self, exc: BaseException) -> None:
        """A Ctrl-C that arrived while SQLite ran the handler surfaces as "interrupted" (the
        sqlite3 module swallows what a handler raises): raise it again as what it was."""
        if interrupted(exc) and not self.fired:
            raise KeyboardInterrupt from None


def interrupted(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc)


def journal_files(path: Path) -> tuple[Path, Path]:
    """The files SQLite keeps beside a cache in WAL mode."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


@dataclass(frozen=True)
class OpenedCache:
    """An open cache file and what its age decides of reading it."""

    db: sqlite3.Connection
    has_judgments: bool  # a read-only look at a file from before the table: none cached
    fingerprint_column: str  # "NULL" for a read-only look at a file from before the column


def open_cache(path: Path, *, writable: bool, lock_wait_s: float,
               query_clock: QueryClock) -> OpenedCache:
    """Open a cache file (created when writable, `mode=ro` when not: then nothing is ever
    written to it, not even the schema or a journal-mode change), after checking that it is
    ours; every failure is a one-line ConfigError naming the file."""
    try:
        db = _connect(path, writable, lock_wait_s)
        query_clock.attach(db)
        query_clock.start()
        return _prepared(db, path, writable, lock_wait_s)
    except sqlite3.OperationalError as exc:
        query_clock.check(exc)
        if interrupted(exc):
            raise cache_error(path, exc, lock_wait_s) from None
        if "locked" in str(exc) or "busy" in str(exc):
            raise cache_error(path, exc, lock_wait_s) from None
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise ConfigError(
                f"{path}: the response cache is read-only ({exc}); make it writable or "
                "pass --orbench-cache=read") from None
        raise ConfigError(f"{path}: cannot open the response cache ({exc})") from None
    except sqlite3.DatabaseError as exc:
        query_clock.check(exc)
        raise cache_error(path, exc, lock_wait_s) from None


def _connect(path: Path, writable: bool, lock_wait_s: float) -> sqlite3.Connection:
    if writable:
        # A loop, an over-long name, a device or a FIFO: one line, not "disk I/O error"
        stat_of(path, "--orbench-cache-path")  # names the option, as the others do
        regular_file(path, "the response cache")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--orbench-cache-path: cannot create the folder of {path} "
                              f"({exc.strerror or exc})") from None
        _drop_orphan_journals(path)
        return sqlite3.connect(str(path), timeout=lock_wait_s, isolation_level=None,
                               check_same_thread=False)
    # A missing file is an empty cache; an existing one is opened mode=ro.
    real = resolved(path)
    stat_of(real, "--orbench-cache-path")
    if regular_file(real, "the response cache") is None:
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    return sqlite3.connect(f"{real.as_uri()}?mode=ro", uri=True, timeout=lock_wait_s,
                           isolation_level=None, check_same_thread=False)


def _prepared(db: sqlite3.Connection, path: Path, writable: bool,
              lock_wait_s: float) -> OpenedCache:
    check_structure(db, path)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        raise ConfigError(f"{path}: cache schema {version} is not {SCHEMA_VERSION}; "
                          "delete the file or pass --orbench-cache-path=NEW")
    if version == 0:
        _check_not_foreign(db, path)
    else:
        _check_columns(db, path)
    if writable or not path.exists():
        db.execute(f"PRAGMA busy_timeout = {int(lock_wait_s * 1000)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        # Fewer checkpoints (the default is 1,000 pages): an index page that many writes
        # change is copied to the file once per checkpoint, not once per 40 writes (80K
        # answers: an eighth less CPU writing; the WAL stays under 16 MB).
        db.execute("PRAGMA wal_autocheckpoint = 4000")
        if version == 0:
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if writable:
            db.executescript(_JUDGMENTS_SCHEMA)
    elif version == 0:  # an empty file: no table to read, nothing cached
        db.close()
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.executescript(_SCHEMA)
    has_judgments = "judgments" in tables_of(db)
    if has_judgments:
        _check_columns(db, path, "judgments", JUDGMENT_COLUMNS)
    columns = set(columns_of(db, "responses"))
    if "system_fingerprint" not in columns and writable:  # a file from before it
        db.execute("ALTER TABLE responses ADD COLUMN system_fingerprint TEXT")
        columns.add("system_fingerprint")
    db.execute("SELECT count(*) FROM responses LIMIT 1").fetchone()
    if writable:
        # Another process holding the write lock is found now, before any request is sent
        # (waited lock_wait_s, then a one-line error), not in the middle of the fetch.
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
    return OpenedCache(db, has_judgments, "system_fingerprint" if "system_fingerprint"
                       in columns else "NULL")


def _check_not_foreign(db: sqlite3.Connection, path: Path) -> None:
    """A file with other tables belongs to another program: never add ours to it."""
    tables = tables_of(db)
    if tables - OWN_TABLES:
        raise ConfigError(f"{path}: not an orbench response cache (it holds other "
                          "tables); pass --orbench-cache-path=NEW")
    if "responses" in tables:
        _check_columns(db, path)


def _check_columns(db: sqlite3.Connection, path: Path, table: str = "responses",
                   required: Iterable[str] = RESPONSE_COLUMNS) -> None:
    """Another program's SQLite file may have a table of ours by name too: not ours."""
    if not set(required) <= set(columns_of(db, table)):
        raise ConfigError(f"{path}: not an orbench response cache (its {table} "
                          "table has other columns); pass --orbench-cache-path=NEW")
