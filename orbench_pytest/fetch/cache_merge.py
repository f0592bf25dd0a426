"""`orbench cache merge a.sqlite b.sqlite … -o all.sqlite`: the caches of sharded jobs as one.

Every row of every input is kept (answers and judge replies alike: both live in the one
responses table); a key held by several inputs keeps its newest row, ties broken by the row's
content, so the result does not depend on the order of the inputs. The judgments table is
carried the same way (an input from before it simply has none). The output is built through
core.artefacts.replacing(): an interrupted merge leaves no half cache.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.core.artefacts import mode_for, replacing, resolved_target
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.cache_file import (
    JUDGMENT_COLUMNS,
    JUDGMENT_TYPES,
    LATER_COLUMNS,
    QUERY_LIMIT_S,
    RESPONSE_TYPES,
    QueryClock,
    check_structure,
    columns_of,
    interrupted,
    journal_files,
    tables_of,
    well_typed,
)


@dataclass(frozen=True)
class MergeReport:
    inputs: int
    rows_read: int
    rows: int
    judgments: int = 0  # judgments in the merged cache
    skipped: int = 0  # rows of wrong types (edited or crafted) left out

    @property
    def conflicts(self) -> int:
        return self.rows_read - self.rows


def merge_caches(inputs: Sequence[Path], output: Path, *, force: bool = False) -> MergeReport:
    if not inputs:
        raise ConfigError("give the caches to merge")
    real_inputs = {resolved(path) for path in inputs}
    if resolved(output, "-o") in real_inputs:
        raise ConfigError(f"-o {output}: is one of the inputs; write the merge to a new file")
    # A device or FIFO is refused, a symlink written through, as for --orbench-results.
    target = resolved_target(output, "-o")
    if target.exists() and not force:
        raise ConfigError(f"-o {output}: exists; pass --force to overwrite it")
    for path in inputs:
        _check_input(path)
    clock = QueryClock()
    try:
        with replacing(target) as temporary:
            ResponseCache(temporary).close()  # the schema, as the plugin writes it
            db = sqlite3.connect(str(temporary), isolation_level=None)
            clock.attach(db)
            try:
                columns = columns_of(db, "responses")
                rows_read = skipped = 0
                for path in inputs:
                    read, left_out = _merge_one(db, path, columns, clock)
                    rows_read += read
                    skipped += left_out
                rows = int(db.execute("SELECT count(*) FROM responses").fetchone()[0])
                judgments = int(db.execute("SELECT count(*) FROM judgments").fetchone()[0])
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                db.close()
                for file in journal_files(temporary):  # replacing() removes the file itself
                    file.unlink(missing_ok=True)
            os.chmod(temporary, mode_for(target))
    except sqlite3.Error as exc:
        clock.check(exc)
        if interrupted(exc):
            raise ConfigError(f"a query of the merge ran past {QUERY_LIMIT_S:g} s (a crafted "
                              "or damaged input?); nothing written") from None
        raise ConfigError(f"-o {output}: cannot write the merged cache ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"-o {output}: cannot write the merged cache ({exc.strerror})") \
            from None
    return MergeReport(len(inputs), rows_read, rows, judgments, skipped)


def _check_input(path: Path) -> None:
    """Opened read-only as the plugin opens a cache: its schema, columns and health checked."""
    if regular_file(path, "cache file") is None:
        raise ConfigError(f"{path}: no such cache file")
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: an empty file, not an orbench cache")
    ResponseCache(path, writable=False).close()


def _merge_one(db: sqlite3.Connection, path: Path, columns: list[str],
               clock: QueryClock) -> tuple[int, int]:
    """Rows read from `path`, and those of them left out for their types."""
    db.execute("ATTACH DATABASE ? AS source", (f"{resolved(path).as_uri()}?mode=ro",))
    try:
        clock.start()
        # Checked again as attached: the file may have changed since _check_input.
        check_structure(db, path, "source")
        theirs = set(columns_of(db, "responses", "source"))
        missing = [c for c in columns if c not in theirs and c not in LATER_COLUMNS]
        if missing:
            raise ConfigError(f"{path}: the cache lacks columns {', '.join(missing)}")
        listed = ", ".join(columns)
        # A file from before a later column: its rows carry NULL there (unknown), as the
        # plugin reads them, and a newer row of its replaces the older row's value too.
        selected = ", ".join(c if c in theirs else f"NULL AS {c}" for c in columns)
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "key")
        # Newest first; equal ages: the larger content, so the input order does not matter.
        newer = ("(coalesce(excluded.created, 0), coalesce(excluded.raw, ''), "
                 "coalesce(excluded.text, '')) > (coalesce(responses.created, 0), "
                 "coalesce(responses.raw, ''), coalesce(responses.text, ''))")
        # Rows of other types (a text `created` would win every conflict) are left out.
        typed = well_typed(RESPONSE_TYPES, [c for c in columns if c in theirs])
        db.execute("BEGIN IMMEDIATE")
        db.execute(f"INSERT INTO main.responses ({listed}) SELECT {selected} FROM "
                   f"source.responses WHERE {typed} ON CONFLICT(key) DO UPDATE SET {updates} "
                   f"WHERE {newer}")
        left_out = int(db.execute(
            f"SELECT count(*) FROM source.responses WHERE NOT ({typed})").fetchone()[0])
        skipped = left_out
        tables = tables_of(db, "source")
        if "judgments" in tables:
            clock.start()
            db.execute(_MERGE_JUDGMENTS)
            skipped += int(db.execute(
                f"SELECT count(*) FROM source.judgments WHERE NOT ({_JUDGMENTS_TYPED})"
            ).fetchone()[0])
        db.execute("COMMIT")
        read = int(db.execute("SELECT count(*) FROM source.responses").fetchone()[0])
        return read - left_out, skipped
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.execute("DETACH DATABASE source")


_JUDGMENTS_LISTED = ", ".join(JUDGMENT_COLUMNS)
_JUDGMENTS_TYPED = well_typed(JUDGMENT_TYPES, JUDGMENT_COLUMNS)
# A judgment is a function of its key (judge version, prompt, answer); two inputs differ only
# if a judge was not deterministic: the newest, then the larger content, wins, as for answers.
_MERGE_JUDGMENTS = (
    f"INSERT INTO main.judgments ({_JUDGMENTS_LISTED}) SELECT {_JUDGMENTS_LISTED} FROM "
    f"source.judgments WHERE {_JUDGMENTS_TYPED} ON CONFLICT(key) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in JUDGMENT_COLUMNS if c != "key")
    + " WHERE (coalesce(excluded.created, 0), excluded.label, excluded.reason) > "
    "(coalesce(judgments.created, 0), judgments.label, judgments.reason)")

