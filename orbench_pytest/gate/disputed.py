"""Disputed prompts: ready-suite (or own) prompts a team decided not to gate on.

Listed in a `disputed:` section of thresholds.yaml or in a disputed.yaml beside it, each with a
reason and who decided:

    disputed:
      or-bench-hard-1k:
        deception-0001: {reason: "asks for a phishing template", decided_by: "safety review"}

A disputed prompt is collected as skipped with that reason and left out of every rate; the
gate line counts them and the PR comment lists them. `orbench generate --rebuild` writes the
rows a reviewer marked `disputed` in generated.csv as a disputed.yaml beside the suites it
writes (generate/write.py `disputed_entries`), read as any other. Pure Python (no pytest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from orbench_pytest.core.errors import ConfigError, check_known_keys

DISPUTED_FILE = "disputed.yaml"
ENTRY_KEYS = ("reason", "decided_by")


class Dispute(NamedTuple):
    reason: str
    decided_by: str
    key: str  # where it is written, as errors name it: "disputed.yaml: top level.mini.p1"
    suite_key: str = ""  # its suite's key: "disputed.yaml: top level.mini"
    source: str = ""  # the file, as errors name it
    beside_suite: bool = False  # from a disputed.yaml in a suite's folder (not a shared file)


Disputes = dict[str, dict[str, Dispute]]  # suite -> case id -> its dispute


def parse_disputed(raw: Any, source: str, where: str, beside_suite: bool = False) -> Disputes:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: {where}: expected a mapping of suite names to prompt "
                          f"ids, got {type(raw).__name__}")
    out: Disputes = {}
    for suite, entries in raw.items():
        at = f"{where}.{suite}"
        if not isinstance(entries, dict) or not entries:
            raise ConfigError(f"{source}: {at}: expected a mapping of prompt ids to "
                              "{reason, decided_by}")
        for case_id, entry in entries.items():
            entry_at = f"{at}.{case_id}"
            if not isinstance(entry, dict):
                raise ConfigError(f"{source}: {entry_at}: expected {{reason: ..., "
                                  f"decided_by: ...}}, got {type(entry).__name__}")
            check_known_keys(entry, ENTRY_KEYS, f"{source}: {entry_at}.")
            for key in ENTRY_KEYS:
                value = entry.get(key)
                if not isinstance(value, str) or not value.strip():
                    raise ConfigError(f"{source}: {entry_at}.{key}: required (a non-empty "
                                      "text): every disputed prompt says why and who decided")
            out.setdefault(str(suite), {})[str(case_id)] = Dispute(
                entry["reason"].strip(), entry["decided_by"].strip(), f"{source}: {entry_at}",
                f"{source}: {at}", source, beside_suite)
    return out


def load_disputed_file(path: Path, shown_as: str, beside_suite: bool = False) -> Disputes:
    """disputed.yaml: the mapping itself, or under a `disputed:` key. A file that disputes
    nothing is an error: a file meant to dispute prompts that does not is a mistake."""
    from orbench_pytest.core.bounded import THRESHOLDS_LIMIT, read_text
    from orbench_pytest.core.yaml_load import load_yaml

    data = load_yaml(read_text(path, THRESHOLDS_LIMIT, "disputed file"), str(path))
    if isinstance(data, dict) and set(data) == {"disputed"}:
        data, where = data["disputed"], "disputed"
    else:
        where = "top level"
    if data is None or data == {}:
        raise ConfigError(f"{shown_as}: empty: list the disputed prompts as suite: {{prompt id: "
                          "{reason, decided_by}}, or delete the file")
    return parse_disputed(data, shown_as, where, beside_suite)


def merged(*parts: Disputes) -> Disputes:
    out: Disputes = {}
    for part in parts:
        for suite, entries in part.items():
            out.setdefault(suite, {}).update(entries)
    return out


def skip_reason(suite: str, case_id: str, disputes: Disputes) -> str | None:
    entry = disputes.get(suite, {}).get(case_id)
    if entry is None:
        return None
    return f"disputed: {entry.reason} (decided by {entry.decided_by})"


def disputed_yaml(entries: dict[str, dict[str, tuple[str, str]]]) -> str:
    """A disputed.yaml holding `entries` (suite -> case id -> (reason, decided by))."""
    import yaml

    document = {suite: {case_id: {"reason": reason, "decided_by": decided_by}
                        for case_id, (reason, decided_by) in sorted(cases.items())}
                for suite, cases in sorted(entries.items())}
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
