"""SQLite response cache: one file, WAL, written as each answer arrives.

Several processes (xdist workers, two runs) may read and write at once: WAL plus a busy
timeout serialises writers without losing rows. Transport errors are never stored here;
provider content-filter blocks are, since for this benchmark they are the observed behaviour.

Beside the answers, the `judgments` table keeps what a judge said of an answer text, keyed by
the judge's name and version and the prompt and answer (`judgment_key`): a re-run over cached
answers reads its verdicts instead of judging 80K answers again, and a changed judge (a new
version) misses and judges afresh without asking the model again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Protocol

from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved, stat_of
from orbench_pytest.core.types import History, Label, Response, Verdict
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


class KeyOf(Protocol):
    def __call__(self, system_prompt: str | None, prompt: str,
                 history: History = ()) -> str: ...


def cache_keys(identity: dict[str, Any]) -> KeyOf:
    """The cache key of (system prompt, prompt, history) for one target: the SHA-256 of the
    compact, key-sorted JSON of {"history" (when there is one), "prompt", "system", "target":
    identity}, with the identity serialised once, not once per prompt (the same bytes, so
    every stored answer keeps its key; a prompt without history keeps the key it always had)."""
    target = _compact_json(identity)

    def key(system_prompt: str | None, prompt: str, history: History = ()) -> str:
        # A string's JSON from json's own encoder: json.dumps builds an encoder per call.
        system = "null" if system_prompt is None else encode_basestring(system_prompt)
        earlier = f'"history":{_compact_json(history)},' if history else ""
        blob = (f'{{{earlier}"prompt":{encode_basestring(prompt)},"system":{system},'
                f'"target":{target}}}')
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    return key


def cache_key(identity: dict[str, Any], system_prompt: str | None, prompt: str,
              history: History = ()) -> str:
    """Hash of everything that changes the answer: target, parameters, system prompt, the
    conversation before the prompt, the prompt."""
    return cache_keys(identity)(system_prompt, prompt, history)


def _compact_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def judgment_keys(judge_name: str, judge_version: str) -> Callable[[str, str], str]:
    """The judgment key of (prompt, answer) for one judge: the hash of what a judgment depends
    on, which judge (name and version) read which answer text to which prompt. Each part is
    length-prefixed, so no two splits of the same text share a key; a third of the cost of
    hashing their JSON, and a re-run hashes every answer. The judge's parts are hashed once
    and the digest copied per answer (the same bytes, so every stored verdict keeps its key)."""
    judge = hashlib.sha256(_length_prefixed(judge_name) + _length_prefixed(judge_version))

    def key(prompt: str, answer: str) -> str:
        text, said = prompt.encode("utf-8"), answer.encode("utf-8")
        digest = judge.copy()
        digest.update(len(text).to_bytes(8, "big") + text + len(said).to_bytes(8, "big") + said)
        return digest.hexdigest()

    return key


def judgment_key(judge_name: str, judge_version: str, prompt: str, answer: str) -> str:
    """The judgment key of one judge's verdict on one answer to one prompt."""
    return judgment_keys(judge_name, judge_version)(prompt, answer)


def _length_prefixed(part: str) -> bytes:
    data = part.encode("utf-8")
    return len(data).to_bytes(8, "big") + data


_INSERT_JUDGMENT = ("INSERT OR REPLACE INTO judgments (key, label, reason, confident, judge, "
                    "created) VALUES (?, ?, ?, ?, ?, ?)")
_LABELS = {label.value: label for label in Label}


_INSERT = ("INSERT OR REPLACE INTO responses (key, text, finish_reason, content_filter, "
           "refusal, reasoning, usage, latency_ms, raw, created, system_fingerprint) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _row(key: str, r: Response) -> tuple[Any, ...]:
    return (key, r.text, r.finish_reason, int(r.content_filter), r.refusal, r.reasoning,
            json.dumps(r.usage), r.latency_ms, r.raw, time.time(), r.system_fingerprint)


class CacheWriteError(Exception):
    """An answer could not be stored (disk full, read-only file, locked too long)."""


class ResponseCache:
    """Read and write answers; `writable=False` opens the file read-only: nothing is ever
    written to it, not even the schema or a journal-mode change."""

    def __init__(self, path: Path, *, writable: bool = True,
                 lock_wait_s: float = defaults.CACHE_LOCK_WAIT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.writable = writable
        self.lock_wait_s = lock_wait_s  # --orbench-cache-lock-wait
        self.clock = clock
        self.query_clock = QueryClock(clock=clock)
        self.ignored_rows = 0  # rows of wrong types met by lookups (asked again)
        # Written rows wait here while another process holds the write lock (see put_many).
        self._pending: list[tuple[Any, ...]] = []
        self._pending_verdicts: list[tuple[Any, ...]] = []
        self._locked_since: float | None = None
        self._busy_ms: int | None = None  # the busy timeout put_many last set
        try:
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
                self._db = sqlite3.connect(str(path), timeout=lock_wait_s,
                                           isolation_level=None, check_same_thread=False)
            else:
                # A missing file is an empty cache; an existing one is opened mode=ro.
                real = resolved(path)
                stat_of(real, "--orbench-cache-path")
                there = regular_file(real, "the response cache") is not None
                self._db = sqlite3.connect(f"{real.as_uri()}?mode=ro", uri=True,
                                           timeout=lock_wait_s, isolation_level=None,
                                           check_same_thread=False) if there \
                    else sqlite3.connect(":memory:", isolation_level=None,
                                         check_same_thread=False)
            self.query_clock.attach(self._db)
            self.query_clock.start()
            check_structure(self._db, path)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ConfigError(
                    f"{path}: cache schema {version} is not {SCHEMA_VERSION}; "
                    "delete the file or pass --orbench-cache-path=NEW"
                )
            if version == 0:
                self._check_not_foreign()
            else:
                self._check_columns()
            if writable or not path.exists():
                self._db.execute(f"PRAGMA busy_timeout = {int(lock_wait_s * 1000)}")
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                # Fewer checkpoints (the default is 1,000 pages): an index page that many
                # writes change is copied to the file once per checkpoint, not once per 40
                # writes (80K answers: an eighth less CPU writing; the WAL stays under 16 MB).
                self._db.execute("PRAGMA wal_autocheckpoint = 4000")
                if version == 0:
                    self._db.executescript(_SCHEMA)
                    self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                if writable:
                    self._db.executescript(_JUDGMENTS_SCHEMA)
            elif version == 0:  # an empty file: no table to read, nothing cached
                self._db.close()
                self._db = sqlite3.connect(":memory:", isolation_level=None,
                                           check_same_thread=False)
                self._db.executescript(_SCHEMA)
            tables = tables_of(self._db)
            # A read-only look at a file from before the table: no judgments cached.
            self._has_judgments = "judgments" in tables
            if self._has_judgments:
                self._check_columns("judgments", JUDGMENT_COLUMNS)
            columns = set(columns_of(self._db, "responses"))
            if "system_fingerprint" not in columns and writable:  # a file from before it
                self._db.execute("ALTER TABLE responses ADD COLUMN system_fingerprint TEXT")
                columns.add("system_fingerprint")
            # A read-only look at an older file: its answers carry no fingerprint.
            self._fingerprint_column = ("system_fingerprint" if "system_fingerprint" in columns
                                        else "NULL")
            self._db.execute("SELECT count(*) FROM responses LIMIT 1").fetchone()
            if writable:
                self._probe_write_lock()
        except sqlite3.OperationalError as exc:
            self.query_clock.check(exc)
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
            self.query_clock.check(exc)
            raise cache_error(path, exc, lock_wait_s) from None

    def _probe_write_lock(self) -> None:
        """Another process holding the write lock is found now, before any request is sent
        (waited lock_wait_s, then a one-line error), not in the middle of the fetch."""
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("ROLLBACK")

    def _check_not_foreign(self) -> None:
        """A file with other tables belongs to another program: never add ours to it."""
        tables = tables_of(self._db)
        if tables - OWN_TABLES:
            raise ConfigError(f"{self.path}: not an orbench response cache (it holds other "
                              "tables); pass --orbench-cache-path=NEW")
        if "responses" in tables:
            self._check_columns()

    def _check_columns(self, table: str = "responses",
                       required: Iterable[str] = RESPONSE_COLUMNS) -> None:
        """Another program's SQLite file may have a table of ours by name too: not ours."""
        if not set(required) <= set(columns_of(self._db, table)):
            raise ConfigError(f"{self.path}: not an orbench response cache (its {table} "
                              "table has other columns); pass --orbench-cache-path=NEW")

    def _rows_of_keys(self, select: str, keys: Iterable[str], then: str = ""
                      ) -> Iterator[tuple[Any, ...]]:
        """The rows of `select` (ending "WHERE key IN", and `then` after the keys) for these
        keys, one query per chunk of 500 (not one per key), in key order: neighbouring
        lookups share the index's pages (a fifth less CPU than hash order)."""
        key_list = sorted(set(keys))
        for start in range(0, len(key_list), 500):
            chunk = key_list[start:start + 500]
            self.query_clock.start()
            yield from self._db.execute(f"{select} ({','.join('?' * len(chunk))}) {then}",
                                        chunk)

    def _rows_in_table_order(self, select: str, keys: Iterable[str]
                             ) -> Iterator[tuple[Any, ...]]:
        """The rows of `select` (a SELECT … FROM responses) for these keys, read in the
        table's order: the keys' rowids first (from the key index alone), then the rows by
        rowid, sorted. Rows are stored as answers arrived, so rows in key order are scattered
        over the whole file and each page is read once per row on it; in rowid order, once
        (80K answers: a third less CPU). One read transaction: a row another process replaces
        meanwhile (a new rowid) is never missed."""
        began = not self._db.in_transaction
        if began:
            self._db.execute("BEGIN")
        try:
            rowids = sorted(rowid for (rowid,) in self._rows_of_keys(
                "SELECT rowid FROM responses WHERE key IN", keys))
            for start in range(0, len(rowids), 500):
                chunk = rowids[start:start + 500]
                self.query_clock.start()
                yield from self._db.execute(
                    f"{select} WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)
        finally:
            if began and self._db.in_transaction:
                self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def get_judgments(self, keys: Iterable[str]) -> dict[str, Verdict]:
        """Stored verdicts of these judgment keys, in one query per chunk. A row this version
        cannot read (an unknown label: edited, or from a newer program) is a miss.

        A judge gives few distinct verdicts (a rerun of 1,974 answers read two), so the rows
        come grouped by verdict, each group's keys joined in one string: a verdict is read and
        built once a chunk, not once an answer, and equal verdicts are one object (each would
        live, with its strings, until the run ends)."""
        if not self._has_judgments:
            return {}
        found: dict[str, Verdict] = {}
        shared: dict[tuple[Any, ...], Verdict | None] = {}

        def verdict(label: Any, reason: Any, confident: Any, judge: Any) -> Verdict | None:
            fields = (label, reason, confident, judge)
            if fields not in shared:
                known = _LABELS.get(label) if isinstance(label, str) else None
                shared[fields] = None if known is None or not isinstance(reason, str) \
                    or not isinstance(judge, str) or not isinstance(confident, int) \
                    else Verdict(known, reason, judge, confident=bool(confident))
            return shared[fields]

        key_list = list(keys)
        # Joined by commas: a judgment key is hex; any other key holding one is read alone.
        alone = [key for key in key_list if "," in key]
        try:
            for *fields, joined in self._rows_of_keys(
                    "SELECT label, reason, confident, judge, group_concat(key) FROM judgments "
                    "WHERE key IN", [key for key in key_list if "," not in key] if alone
                    else key_list, "GROUP BY label, reason, confident, judge"):
                if (found_verdict := verdict(*fields)) is not None:
                    found.update(dict.fromkeys(joined.split(","), found_verdict))
            for key in alone:
                self.query_clock.start()
                for fields in self._db.execute("SELECT label, reason, confident, judge FROM "
                                               "judgments WHERE key = ?", (key,)):
                    if (found_verdict := verdict(*fields)) is not None:
                        found[key] = found_verdict
        except sqlite3.DatabaseError as exc:
            self.query_clock.check(exc)
            raise cache_error(self.path, exc, self.lock_wait_s) from None
        return found

    def get_many(self, keys: Iterable[str], *, usage: bool = True) -> dict[str, Response]:
        """Look up many keys at once (one query per chunk, not one per item). `usage=False`:
        the token counts are not read (each `usage` is empty), for a run, which counts the
        tokens of the answers it asks, not of those it finds here."""
        try:
            return self._get_many(keys, usage)
        except sqlite3.DatabaseError as exc:
            self.query_clock.check(exc)
            raise cache_error(self.path, exc, self.lock_wait_s) from None

    def _get_many(self, keys: Iterable[str], with_usage: bool) -> dict[str, Response]:
        found: dict[str, Response] = {}
        # Without usage, its type is still checked (a row of another is corrupt either way):
        # NULL for a text, 0 (no type of ours) for anything else.
        usage = ("usage" if with_usage
                 else "CASE WHEN typeof(usage) IN ('text', 'null') THEN NULL ELSE 0 END")
        rows = self._rows_in_table_order(
            "SELECT key, text, finish_reason, content_filter, refusal, reasoning, "
            f"{usage}, latency_ms, created, {self._fingerprint_column} FROM responses", keys)
        for row in rows:
            if not _well_typed_row(row):
                self.ignored_rows += 1  # corrupt: a miss, asked again and overwritten
                continue
            (key, text, finish, blocked, refusal, reasoning, usage, latency, created,
             fingerprint) = row
            found[key] = _stored_response(text, finish, latency or 0.0, bool(blocked), refusal,
                                          reasoning, _usage(usage) if usage else {},
                                          fingerprint, created)
        return found

    @property
    def pending(self) -> int:
        """Rows kept for the next write while another process held the write lock."""
        return len(self._pending) + len(self._pending_verdicts)

    def put(self, key: str, response: Response) -> None:
        """Store one answer now (autocommit), so an interrupted run keeps it."""
        self.put_many([(key, response)])

    def put_many(self, items: Iterable[tuple[str, Response]],
                 judgments: Iterable[tuple[str, Verdict]] = (), *, wait: bool = True) -> None:
        """Store answers that arrived together, and the judgments made of them, in one
        transaction (one commit, not N). Judgments that are errors are never stored.

        `wait=False` (the fetch, on its event loop): one attempt blocks at most
        WRITE_ATTEMPT_S; while another process holds the write lock the rows wait here and go
        with the next write, so answers in flight are never held up (nor counted as timeouts)
        by a lock. Either way a lock held lock_wait_s in all raises CacheWriteError."""
        if not self.writable:
            return
        now = time.time()
        self._pending.extend(_row(key, r) for key, r in items if r.error is None)
        self._pending_verdicts.extend(
            (key, v.label.value, v.reason, int(v.confident), v.judge, now)
            for key, v in judgments if v.label is not Label.ERROR)
        if not (self._pending or self._pending_verdicts):
            return
        rows = self._pending
        # In key order: the inserts walk the key index once, not at random (a quarter less CPU
        # for a write of 16K verdicts)
        verdicts = sorted(self._pending_verdicts)
        started = self.clock()
        waited = 0.0 if self._locked_since is None else started - self._locked_since
        left = max(self.lock_wait_s - waited, 0.0)
        busy_ms = int(1000 * (left if wait else min(left, WRITE_ATTEMPT_S)))
        try:
            if busy_ms != self._busy_ms:  # a pragma costs as much as the BEGIN: only on change
                self._db.execute(f"PRAGMA busy_timeout = {busy_ms}")
                self._busy_ms = busy_ms
            # IMMEDIATE: take the write lock up front, so a second writer waits (busy
            # timeout) instead of failing on a lock upgrade.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self.query_clock.start()
                if rows:
                    self._db.executemany(_INSERT, rows)
                if verdicts:
                    self._db.executemany(_INSERT_JUDGMENT, verdicts)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self.query_clock.check(exc)
            locked = isinstance(exc, sqlite3.OperationalError) and (
                "locked" in str(exc) or "busy" in str(exc))
            if locked:
                if self._locked_since is None:
                    self._locked_since = started
                if not wait and self.clock() - self._locked_since < self.lock_wait_s:
                    return  # kept; written with the next attempt
                exc = sqlite3.OperationalError(
                    f"locked by another process for {self.lock_wait_s:g} s")
            self._pending, self._pending_verdicts = [], []
            lost = [f"{n} {what}(s)" for n, what in ((len(rows), "answer"),
                                                      (len(verdicts), "judgment")) if n]
            raise CacheWriteError(f"{self.path}: cannot write the response cache ({exc}); "
                                  f"{' and '.join(lost)} not stored") from None
        self._pending, self._pending_verdicts = [], []
        self._locked_since = None

    def count(self) -> int:
        self.query_clock.start()
        return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])


_RESPONSE_ROW = ("key", "text", "finish_reason", "content_filter", "refusal", "reasoning",
                 "usage", "latency_ms", "created", "system_fingerprint")
_PYTHON_TYPES = {"text": str, "null": type(None), "integer": int, "real": float}
# Every combination of Python types a row of ours may hold (576): a row's types are checked
# with one set lookup, not one test per column (a third of the time, on every cached answer).
_ROW_TYPES = frozenset(itertools.product(
    *(tuple(_PYTHON_TYPES[t] for t in RESPONSE_TYPES[c]) for c in _RESPONSE_ROW)))


def _well_typed_row(row: tuple[Any, ...]) -> bool:
    """A looked-up row holds what the plugin writes: anything else is corrupt (a text
    `created` would end a run in a TypeError). Ages and latencies must be finite too."""
    if tuple(map(type, row)) not in _ROW_TYPES:
        return False
    latency, created = row[7], row[8]
    return ((latency is None or math.isfinite(latency))
            and (created is None or math.isfinite(created)))


_new = object.__new__


def _stored_response(text: str | None, finish_reason: str | None, latency_ms: float,
                     content_filter: bool, refusal: str | None, reasoning: str | None,
                     usage: dict[str, int], system_fingerprint: str | None,
                     created: float | None) -> Response:
    """The Response that `Response(…, cached=True, attempts=0)` makes of a stored row, each
    field set once, without `__init__`: its `__post_init__` replaces lone surrogates, which
    text read from SQLite never holds (Python decodes it as strict UTF-8, or fails the read),
    and an 80K rerun builds 80K of them (0.08 s of CPU less). tests/test_cache.py checks
    that it equals the ordinary construction, every field included."""
    response = _new(Response)
    response.text = text
    response.finish_reason = finish_reason
    response.latency_ms = latency_ms
    response.error = None
    response.content_filter = content_filter
    response.refusal = refusal
    response.reasoning = reasoning
    response.usage = usage
    response.raw = None
    response.cached = True
    response.attempts = 0
    response.system_fingerprint = system_fingerprint
    response.created = created
    return response


def _usage(stored: Any) -> dict[str, int]:
    """Token counts as stored; anything else (an edited or foreign row) is no usage."""
    try:
        usage = json.loads(stored) if stored else {}
    except (TypeError, ValueError, RecursionError):
        return {}
    return usage if isinstance(usage, dict) else {}
