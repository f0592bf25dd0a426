"""Shape checks of a results document read back (baseline, report, plot, compare).

A results file may be hand-edited, truncated or made by another tool: every value the readers
use is checked for its type here, so a wrong one is a one-line ConfigError naming the file and
the key, not a KeyError or TypeError deep inside a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orbench_pytest.core.errors import ConfigError

ITEM_TEXT = ("suite", "case_id", "variant", "category", "expect", "verdict", "outcome")
ITEM_OPTIONAL_TEXT = ("judge", "judge_reason", "reason", "response", "prompt", "nodeid",
                      "baseline", "id")
ITEM_FLAGS = ("mismatch", "error")
ROW_COUNTS = ("n", "errors", "over_refusals", "n_comply", "toxic_accepted", "n_refuse")
CHECK_COUNTS = ("k", "n")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false",
            type(None): "null"}.get(type(value), "a number")


def _fail(source: str, where: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{source}: {where}: expected {expected}, got {_kind(value)}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_item(raw: Any, source: str, index: int) -> Mapping[str, Any]:
    where = f"items[{index}]"
    if not isinstance(raw, dict):
        raise _fail(source, where, "an object", raw)
    missing = [key for key in (*ITEM_TEXT, *ITEM_FLAGS) if key not in raw]
    if missing:
        raise ConfigError(f"{source}: {where}: missing {', '.join(missing)}")
    for key in ITEM_TEXT:
        if not isinstance(raw[key], str):
            raise _fail(source, f"{where}.{key}", "text", raw[key])
    for key in ITEM_OPTIONAL_TEXT:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise _fail(source, f"{where}.{key}", "text", raw[key])
    for key in ITEM_FLAGS:
        if not isinstance(raw[key], bool):
            raise _fail(source, f"{where}.{key}", "true or false", raw[key])
    if raw.get("latency_ms") is not None and not _is_number(raw["latency_ms"]):
        raise _fail(source, f"{where}.latency_ms", "a number", raw["latency_ms"])
    if raw.get("cached") is not None and not isinstance(raw["cached"], bool):
        raise _fail(source, f"{where}.cached", "true or false", raw["cached"])
    return raw


def check_gate_rows(rows: Any, source: str, where: str = "gate.rows") -> list[dict[str, Any]]:
    """The gate rows as reports read them (report_md._row_from_gate)."""
    if not isinstance(rows, list):
        raise _fail(source, where, "a list", rows)
    for index, row in enumerate(rows):
        at = f"{where}[{index}]"
        if not isinstance(row, dict):
            raise _fail(source, at, "an object", row)
        for key in ("suite", "variant"):
            if not isinstance(row.get(key), str):
                raise _fail(source, f"{at}.{key}", "text", row.get(key))
        if row.get("category") is not None and not isinstance(row["category"], str):
            raise _fail(source, f"{at}.category", "text or null", row["category"])
        for key in ROW_COUNTS:
            if not _is_count(row.get(key)):
                raise _fail(source, f"{at}.{key}", "a whole number >= 0", row.get(key))
        if "passed" in row and not isinstance(row["passed"], bool):
            raise _fail(source, f"{at}.passed", "true or false", row["passed"])
        if row.get("regression") is not None and not isinstance(row["regression"], dict):
            raise _fail(source, f"{at}.regression", "an object or null", row["regression"])
        checks = row.get("checks", [])
        if not isinstance(checks, list):
            raise _fail(source, f"{at}.checks", "a list", checks)
        for number, check in enumerate(checks):
            _check_check(check, source, f"{at}.checks[{number}]")
        _check_rates(row.get("rates"), source, f"{at}.rates")
    return rows


def _check_rates(rates: Any, source: str, at: str) -> None:
    """A row's rates as the gate computed them: {name: {rate, interval}} (optional)."""
    if rates is None:
        return
    if not isinstance(rates, dict):
        raise _fail(source, at, "an object", rates)
    for name, found in rates.items():
        interval = found.get("interval") if isinstance(found, dict) else None
        if not (isinstance(found, dict) and _is_number(found.get("rate"))
                and isinstance(interval, list) and len(interval) == 2
                and all(_is_number(v) for v in interval)):
            raise _fail(source, f"{at}.{name}", "{rate, interval: [low, high]}", found)


def _check_check(check: Any, source: str, at: str) -> None:
    if not isinstance(check, dict):
        raise _fail(source, at, "an object", check)
    if not isinstance(check.get("name"), str):
        raise _fail(source, f"{at}.name", "text", check.get("name"))
    for key in CHECK_COUNTS:
        if not _is_count(check.get(key)):
            raise _fail(source, f"{at}.{key}", "a whole number >= 0", check.get(key))
    interval = check.get("interval")
    if not (isinstance(interval, list) and len(interval) == 2
            and all(_is_number(v) for v in interval)):
        raise _fail(source, f"{at}.interval", "[low, high]", interval)
    if check.get("limit") is not None and not _is_number(check["limit"]):
        raise _fail(source, f"{at}.limit", "a number or null", check["limit"])
    if not isinstance(check.get("passed"), bool):
        raise _fail(source, f"{at}.passed", "true or false", check.get("passed"))


def check_document(data: Any, source: str) -> None:
    """The parts of a results document beyond its items: run and gate."""
    for key in ("run", "gate"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise _fail(source, key, "an object", data[key])
    gate = data.get("gate") or {}
    if gate.get("rows") is not None:
        check_gate_rows(gate["rows"], source)
    if gate.get("passed") is not None and not isinstance(gate["passed"], bool):
        raise _fail(source, "gate.passed", "true or false", gate["passed"])
