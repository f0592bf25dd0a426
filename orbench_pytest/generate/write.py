"""Write a suite directory: the review CSV, the suite files pinned by sha256, the provenance.

  generated.csv    every candidate that survived deduplication, with its votes; review it
  safe.csv/.yaml   prompts the moderators called safe: must be answered
  toxic.csv/.yaml  prompts the moderators called toxic: must be refused
  hard.csv/.yaml   safe prompts that at least K probe models refused (with --probe-model)
  provenance.json  models, endpoints (never keys), prompt hashes, date, counts per stage

  disputed.yaml    the rows a reviewer marked `disputed` (the cell is the reason, `decided_by`
                   who decided): the plugin skips them with that reason and leaves them out
                   of every rate, as any disputed prompt (gate/disputed.py)
Every file is written whole to a temporary name and then renamed: an interrupted write never
leaves a suite pinned to half a file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from orbench_pytest.core.artefacts import replacing
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import csv_cell

REVIEW_FILE = "generated.csv"
PROVENANCE_FILE = "provenance.json"
COLUMNS = ("id", "prompt", "category", "expect", "decision", "moderators_agree", "safe_votes",
           "toxic_votes", "abstentions", "votes", "seed_id", "probe_refusals", "probes", "hard",
           "disputed", "decided_by")
# Columns a review CSV written before they existed may lack.
OPTIONAL_COLUMNS = ("decided_by",)
REVIEW_DECIDER = f"review of {REVIEW_FILE}"  # decided_by when a disputed row names no one
SUITE_COLUMNS = ("id", "prompt", "category", "seed_id")
# Suite kind → (which rows, what the model must do, description).
SUITE_KINDS: dict[str, tuple[str, str]] = {
    "safe": ("comply", "prompts that look harmful but are safe: every one must be answered"),
    "toxic": ("refuse", "toxic prompts the moderators flagged: every one must be refused"),
    "hard": ("comply", "safe prompts that probe models still refused: must be answered"),
}


def is_disputed(row: dict[str, str]) -> bool:
    return bool((row.get("disputed") or "").strip())


def suite_rows(rows: Sequence[dict[str, str]], kind: str) -> list[dict[str, str]]:
    """A suite's rows, the disputed ones included (disputed.yaml skips them in a run)."""
    if kind == "safe":
        return [row for row in rows if row["decision"] == "safe"]
    if kind == "toxic":
        return [row for row in rows if row["decision"] == "toxic"]
    return [row for row in rows if row["decision"] == "safe" and row.get("hard") == "yes"]


def disputed_entries(name: str, rows: Sequence[dict[str, str]]
                     ) -> dict[str, dict[str, tuple[str, str]]]:
    """suite -> prompt id -> (reason, decided by) of the rows a reviewer marked disputed, under
    every suite that holds them (a hard prompt is in <name>-safe and <name>-hard)."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for kind in SUITE_KINDS:
        for row in suite_rows(rows, kind):
            if is_disputed(row):
                decided_by = (row.get("decided_by") or "").strip() or REVIEW_DECIDER
                out.setdefault(f"{name}-{kind}", {})[row["id"]] = (row["disputed"].strip(),
                                                                   decided_by)
    return out


def review_order(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Rows the moderators disagreed on first (stable: otherwise in generation order)."""
    return sorted(rows, key=lambda row: row.get("moderators_agree") == "yes")


def csv_text(rows: Iterable[dict[str, str]], columns: Sequence[str]) -> str:
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in row.items()}
                     for row in rows)
    return buffer.getvalue()


def write_file(path: Path, text: str) -> str:
    """Write atomically; returns the sha256 of the bytes written."""
    data = text.encode("utf-8")
    try:
        with replacing(path) as temporary:
            temporary.write_bytes(data)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror})") from None
    return hashlib.sha256(data).hexdigest()


def suite_yaml(name: str, kind: str, source: str, sha256: str, count: int) -> str:
    expect, description = SUITE_KINDS[kind]
    document = {"name": f"{name}-{kind}", "description": f"{count} {description}",
                "source": source, "sha256": sha256, "prompt": "prompt",
                "category": "category", "id": "id", "expect": expect}
    header = ("# Written by `orbench generate` (see provenance.json). Review generated.csv, then\n"
              "# rebuild with: orbench generate --rebuild --out <this folder>\n")
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def write_suites(out: Path, name: str, rows: Sequence[dict[str, str]]) -> dict[str, Any]:
    """The suite CSVs and YAMLs of `rows`; an empty kind has no files (stale ones go)."""
    written: dict[str, Any] = {}
    for kind in SUITE_KINDS:
        chosen = suite_rows(rows, kind)
        csv_path, yaml_path = out / f"{kind}.csv", out / f"{kind}.yaml"
        if not chosen:
            for stale in (csv_path, yaml_path):
                try:
                    stale.unlink(missing_ok=True)
                except OSError as exc:
                    raise ConfigError(f"{stale}: cannot remove ({exc.strerror})") from None
            written[kind] = {"rows": 0}
            continue
        digest = write_file(csv_path, csv_text(chosen, SUITE_COLUMNS))
        write_file(yaml_path, suite_yaml(name, kind, csv_path.name, digest, len(chosen)))
        written[kind] = {"rows": len(chosen), "file": csv_path.name, "sha256": digest,
                         "suite": yaml_path.name}
    _write_disputed(out, disputed_entries(name, rows))
    return written


def _write_disputed(out: Path, entries: dict[str, dict[str, tuple[str, str]]]) -> None:
    from orbench_pytest.gate.disputed import DISPUTED_FILE, disputed_yaml

    path = out / DISPUTED_FILE
    if entries:
        write_file(path, DISPUTED_HEADER + disputed_yaml(entries))
        return
    try:
        path.unlink(missing_ok=True)  # no row disputed any more: a stale file goes
    except OSError as exc:
        raise ConfigError(f"{path}: cannot remove ({exc.strerror})") from None


DISPUTED_HEADER = (f"# Written by `orbench generate` from the `disputed` column of {REVIEW_FILE}:"
                   "\n# edit that column and rebuild (orbench generate --rebuild --out <this "
                   "folder>).\n")


def write_review_csv(out: Path, rows: Sequence[dict[str, str]]) -> str:
    return write_file(out / REVIEW_FILE, csv_text(review_order(rows), COLUMNS))


def write_provenance(out: Path, provenance: dict[str, Any]) -> None:
    write_file(out / PROVENANCE_FILE,
               json.dumps(provenance, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_provenance(out: Path) -> dict[str, Any]:
    from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_bytes, regular_file

    path = out / PROVENANCE_FILE
    if regular_file(path) is None:
        raise ConfigError(f"{path}: not found; is {out} a folder written by orbench "
                          "generate?")
    try:
        data = json.loads(read_bytes(path, OPTION_FILE_LIMIT))
    except (ValueError, RecursionError) as exc:  # deep nesting too
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise ConfigError(f"{path}: unreadable ({why})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data
