"""SQLite response cache: one file, WAL, written as each answer arrives.

Several processes (xdist workers, two runs) may read and write at once: WAL plus a busy
timeout serialises writers without losing rows. Transport errors are never stored here;
provider content-filter blocks are, since for this benchmark they are the observed behaviour.

Beside the answers, the `judgments` table keeps what a judge said of an answer text, keyed by
the judge's name and version and the prompt and answer (`judgment_keys`): a re-run over cached
answers reads its verdicts instead of judging 80K answers again, and a changed judge (a new
version) misses and judges afresh without asking the model again.

This module holds the keys and the lookups; the file, its schema and its checks are
cache_file.py's, the writes cache_write.py's (CacheWriteError, which put_many raises, is
imported from here with the cache).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Protocol

from orbench_pytest.core import defaults
from orbench_pytest.core.types import History, Label, Response, Verdict
from orbench_pytest.fetch.cache_file import RESPONSE_TYPES, QueryClock, cache_error, open_cache
from orbench_pytest.fetch.cache_write import CacheWriteError as CacheWriteError  # re-export
from orbench_pytest.fetch.cache_write import CacheWrites


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


def _length_prefixed(part: str) -> bytes:
    data = part.encode("utf-8")
    return len(data).to_bytes(8, "big") + data


_LABELS = {label.value: label for label in Label}



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
        opened = open_cache(path, writable=writable, lock_wait_s=lock_wait_s,
                            query_clock=self.query_clock)
        self._db = opened.db
        self._has_judgments = opened.has_judgments
        self._fingerprint_column = opened.fingerprint_column
        self._writes = CacheWrites(self._db, path, lock_wait_s=lock_wait_s, clock=clock,
                                   query_clock=self.query_clock) if writable else None

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
        return 0 if self._writes is None else self._writes.pending

    def put_many(self, items: Iterable[tuple[str, Response]],
                 judgments: Iterable[tuple[str, Verdict]] = (), *, wait: bool = True) -> None:
        """Store answers that arrived together, and the judgments made of them, in one
        transaction (cache_write.py); nothing when the cache was opened read-only."""
        if self._writes is not None:
            self._writes.put_many(items, judgments, wait=wait)


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
