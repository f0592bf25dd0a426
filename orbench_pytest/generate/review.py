"""Human review: disagreements first, a `disputed` column to fill, and a rebuild of the suites."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orbench_pytest.catalog.datasets import read_rows
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import csv_value, inert_text
from orbench_pytest.generate.write import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    REVIEW_FILE,
    is_disputed,
    read_provenance,
    review_order,
    write_provenance,
    write_review_csv,
    write_suites,
)

SHOWN_CHARS = 160


def read_review_rows(out: Path) -> list[dict[str, str]]:
    path = out / REVIEW_FILE
    if regular_file(path) is None:
        raise ConfigError(f"{path}: not found; run orbench generate with --out {out} first")
    rows = [{key: csv_value(cell) for key, cell in row.items()}
            for row in read_rows(path)]
    missing = [c for c in COLUMNS if c not in rows[0] and c not in OPTIONAL_COLUMNS]
    if missing:
        raise ConfigError(f"{path}: missing column {missing[0]!r} (a file written by orbench "
                          "generate has: " + ", ".join(COLUMNS) + ")")
    return rows


def carry_review(out: Path, rows: list[dict[str, str]]) -> int:
    """Keep a reviewer's `disputed` marks (and who decided) when the folder is generated
    again: a row with the same id and prompt keeps its mark. Returns how many were carried."""
    path = out / REVIEW_FILE
    if regular_file(path) is None:
        return 0
    marks = {(csv_value(row.get("id") or ""), csv_value(row.get("prompt") or "")):
             (csv_value(row.get("disputed") or ""),
              csv_value(row.get("decided_by") or ""))
             for row in read_rows(path) if is_disputed(row)}
    carried = 0
    for row in rows:
        mark = marks.get((row["id"], row["prompt"]))
        if mark:
            row["disputed"], row["decided_by"] = mark
            carried += 1
    return carried


def review_lines(rows: Sequence[dict[str, str]], limit: int) -> list[str]:
    ordered = review_order(rows)
    disagreed = [row for row in ordered if row["moderators_agree"] != "yes"]
    lines = [f"{len(rows)} candidates; the moderators disagreed on {len(disagreed)}; "
             f"{sum(is_disputed(r) for r in rows)} marked disputed by a reviewer"]
    for row in ordered[:limit]:
        flag = " [disputed]" if is_disputed(row) else ""
        lines.append(f"  {inert_text(row['id'], 40)}  {row['decision']:<11} "
                     f"votes {inert_text(row['votes'], 120)}{flag}")
        lines.append(f"      {inert_text(row['prompt'], SHOWN_CHARS)}")
    if len(ordered) > limit:
        lines.append(f"  … {len(ordered) - limit} more rows in {REVIEW_FILE}")
    lines.append(f"To dispute a row, write why in its 'disputed' cell in {REVIEW_FILE} (and "
                 "who decided in 'decided_by'), then run: orbench generate --rebuild --out "
                 "<folder>; the rebuild lists it in disputed.yaml, and test runs skip it with "
                 "that reason, out of every rate")
    return lines


def rebuild(out: Path) -> dict[str, Any]:
    """Suites and pins from the reviewed CSV; no model is asked."""
    rows = read_review_rows(out)
    provenance = read_provenance(out)
    name = provenance.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{out}/provenance.json: no suite name")
    suites = write_suites(out, name, rows)
    write_review_csv(out, rows)
    provenance["suites"] = suites
    provenance["review"] = {
        "rebuilt": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "rows": len(rows),
        "disputed": sum(is_disputed(r) for r in rows),
    }
    write_provenance(out, provenance)
    return provenance
