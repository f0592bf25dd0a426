"""Suite files (suites/*.yaml) → PromptCase lists.

A suite names a source (inline prompts, a local CSV/JSONL file, or hf://…) and how its rows map
to prompt, expectation, category and id, plus optional sampling. Every problem is a one-line
ConfigError naming the file and the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import PROMPT_LIMIT
from orbench_pytest.core.conversation import parse_turns, split_final
from orbench_pytest.core.errors import ConfigError, check_known_keys
from orbench_pytest.core.ids import NAME, safe_id
from orbench_pytest.core.paths import resolved
from orbench_pytest.core.types import (
    EXPECTATIONS,
    LONE_SURROGATE_ERROR,
    Expectation,
    History,
    PromptCase,
    has_lone_surrogate,
)
from orbench_pytest.core.untrusted import terminal_text

SUITE_KEYS = ("name", "description", "license", "citation", "source", "sha256", "rows",
              "where", "prompts", "prompt", "messages", "category", "expect", "id", "subset",
              "sample", "judge")
INLINE_KEYS = ("prompt", "messages", "expect", "category", "id")
SAMPLE_KEYS = ("n", "seed", "stratify")
SUBSET_KEY = "subset"  # the suite's own subset, as --orbench-subset; `sample:` until renamed
OLD_SUBSET_KEY = "sample"
# More prompts than this run only when sampled or asked for in full (--orbench-subset=all):
# an unsampled OR-Bench-80K is 80,359 paid requests.
UNSAMPLED_LIMIT = 5_000


@dataclass(frozen=True)
class SuiteOptions:
    """Run-wide choices that change which cases a suite yields."""

    subset: int | float | None = None  # --orbench-subset overrides the suite's own
    seed: int | None = None
    categories: tuple[str, ...] = ()  # --orbench-category filter
    data_dirs: tuple[Path, ...] = ()  # --orbench-data-dir, looked in before any download
    ready_suite_dir: Path | None = None  # suites shipped by this project require pinned sources


@dataclass
class Suite:
    """One suite file, parsed: its prompt cases and what it sets for them."""

    name: str
    path: Path
    cases: list[PromptCase] = field(default_factory=list)
    judge: str | None = None
    categories: list[str] = field(default_factory=list)
    # Prompts the suite has as defined (its sample), before --orbench-category: what a gate
    # over part of it is measured against ("gated on 62 of 1,319 prompts").
    full_size: int = 0
    # Every prompt id the suite defines (before sampling and --orbench-category): what a
    # disputed prompt may name.
    ids: frozenset[str] = frozenset()


def is_suite_document(data: Any) -> bool:
    return isinstance(data, dict) and "name" in data and ("prompts" in data or "source" in data)


def read_suite_document(path: Path) -> Any:
    from orbench_pytest.core.bounded import SUITE_LIMIT, read_text
    from orbench_pytest.core.yaml_load import load_yaml

    return load_yaml(read_text(path, SUITE_LIMIT), str(path))


def load_suite(path: Path, options: SuiteOptions, data: Any = None) -> Suite:
    if data is None:
        data = read_suite_document(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a suite file is a mapping with name and prompts or source")
    check_known_keys(data, SUITE_KEYS, f"{path}: ")
    name = data.get("name")
    if isinstance(name, str) and len(name) > defaults.NAME_LIMIT:
        raise ConfigError(f"{path}: name: {len(name):,} characters, more than the "
                          f"{defaults.NAME_LIMIT} a suite name may hold")
    if not isinstance(name, str) or not NAME.match(name):
        raise ConfigError(f"{path}: name: {name!r} must be letters, digits, '-', '_' or '.'")
    has_prompts, has_source = "prompts" in data, "source" in data
    if has_prompts == has_source:
        raise ConfigError(f"{path}: give exactly one of 'prompts' (inline) or 'source' (a file)")
    judge = data.get("judge")
    if judge is not None and judge not in defaults.JUDGE_NAMES:
        raise ConfigError(f"{path}: judge: {judge!r} is not allowed "
                          f"(allowed: {', '.join(defaults.JUDGE_NAMES)})")
    own_size, own_seed = _suite_subset(path, data)  # the suite's own: its size as defined
    size = options.subset if options.subset is not None else own_size
    if has_prompts:
        rows = _inline_rows(path, data["prompts"])
        mapping: dict[str, Any] = {"prompt": "prompt", "category": "category", "id": "id",
                                   "messages": "messages",
                                   "expect": data.get("expect", {"column": "expect"})}
    else:
        declared = _declared_rows(path, data)
        if size is None and not options.categories and declared is not None:
            _check_unsampled(path, name, declared)  # before a download of 80K rows
        rows = _source_rows(path, data, options)
        if declared is not None and len(rows) != declared:
            raise ConfigError(f"{path}: rows: the suite pins {declared} rows, the file has "
                              f"{len(rows)}; replace the file with the published one")
        rows = _where(path, data.get("where"), rows)
        mapping = {key: data.get(key)
                   for key in ("prompt", "messages", "category", "id", "expect")}
        mapping["prompt"] = mapping["prompt"] or "prompt"
        mapping["messages"] = mapping["messages"] or "messages"
    explicit = frozenset() if has_prompts else frozenset(
        key for key in ("category", "id", "messages") if data.get(key) is not None)
    cases = _cases(path, name, rows, mapping, explicit)
    suite = Suite(name=name, path=path, judge=judge)
    suite.categories = sorted({case.category for case in cases})
    all_cases = cases
    suite.ids = frozenset(case.case_id for case in all_cases)
    cases = _filter_categories(path, cases, options.categories)
    suite.full_size = len(all_cases)
    if size is None:
        _check_unsampled(path, name, len(cases))
    else:
        from orbench_pytest.catalog.sampling import stratified_sample

        seed = options.seed if options.seed is not None else own_seed
        picked = stratified_sample([case.category for case in cases], size, seed)
        cases = [cases[i] for i in picked]
        # --orbench-subset is part of a suite, as -k is: its whole is the suite as defined.
        if own_size is not None:
            suite.full_size = len(stratified_sample([case.category for case in all_cases],
                                                    own_size, seed))
    suite.cases = cases
    return suite


def _inline_rows(path: Path, prompts: Any) -> list[dict[str, str]]:
    if not isinstance(prompts, list) or not prompts:
        raise ConfigError(
            f"{path}: prompts: expected a non-empty list of {{prompt, expect, category}}")
    rows = []
    for index, entry in enumerate(prompts):
        if isinstance(entry, str):
            entry = {"prompt": entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: prompts[{index}]: expected a mapping or a string")
        check_known_keys(entry, INLINE_KEYS, f"{path}: prompts[{index}].")
        for key, value in entry.items():
            if key == "messages":  # checked with the other formats' JSON text, in _cases
                entry = {**entry, key: json.dumps(value, ensure_ascii=False, default=str)}
            elif isinstance(value, (list, dict)):
                raise ConfigError(f"{path}: prompts[{index}].{key}: expected text, got a "
                                  f"{'list' if isinstance(value, list) else 'mapping'}")
        rows.append({k: "" if v is None else str(v) for k, v in entry.items()})
    return rows


def _source_rows(path: Path, data: dict[str, Any], options: SuiteOptions) -> list[dict[str, str]]:
    from orbench_pytest.catalog import datasets
    source = data["source"]
    if not isinstance(source, str) or not source:
        raise ConfigError(f"{path}: source: expected a path, https:// or hf:// URL")
    sha256 = data.get("sha256")
    pinned = isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256)
    if sha256 is not None and not pinned:
        raise ConfigError(f"{path}: sha256: expected 64 lowercase hex digits, got {sha256!r}")
    data_options = datasets.DataOptions.from_env(data_dirs=options.data_dirs)
    ready = (options.ready_suite_dir is not None
             and resolved(path).parent == options.ready_suite_dir.resolve())
    outside_ok = _in_named_data_dir(path.parent, source, data_options.data_dirs)
    try:
        return datasets.load_rows(source, base_dir=path.parent, sha256=sha256,
                                  options=data_options, require_pin=ready,
                                  allow_outside=outside_ok)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if str(path) in message else f"{path}: {message}") from None


def _in_named_data_dir(base: Path, source: str, data_dirs: Sequence[Path]) -> bool:
    """A local source may leave the suite's folder only into a data folder the user named
    (--orbench-data-dir or $ORBENCH_DATA_DIR): a suite file alone cannot reach other files,
    such as ../../.ssh/id_rsa whose lines would end up in reports as prompts."""
    if not data_dirs or "://" in source:
        return False
    target = resolved(resolved(base) / Path(source).expanduser(), "source")
    return any(target.is_relative_to(resolved(folder, "--orbench-data-dir"))
               for folder in data_dirs)


def _declared_rows(path: Path, data: dict[str, Any]) -> int | None:
    rows = data.get("rows")
    if rows is None:
        return None
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ConfigError(f"{path}: rows: expected the file's row count (a whole number >= 1), "
                          f"got {rows!r}")
    return rows


def _check_unsampled(path: Path, name: str, prompts: int) -> None:
    if prompts > UNSAMPLED_LIMIT:
        raise ConfigError(f"{path}: {name} would send {prompts:,} prompts; sample it with "
                          f"--orbench-subset=N (e.g. 2000), or run all of them with "
                          f"--orbench-subset=all")


def _cases(path: Path, suite: str, rows: list[dict[str, str]],
           mapping: dict[str, Any], explicit: frozenset[str] = frozenset()) -> list[PromptCase]:
    if not rows:
        raise ConfigError(f"{path}: the suite has no prompts")
    columns: set[str] = set().union(*rows)  # inline rows differ: a prompt here, messages there
    messages_col = mapping.get("messages") or "messages"
    if not isinstance(messages_col, str):
        raise ConfigError(f"{path}: messages: expected a column name, got {messages_col!r}")
    if "messages" in explicit and messages_col not in columns:
        raise ConfigError(f"{path}: messages: missing column {messages_col!r} "
                          f"(columns: {', '.join(sorted(columns))})")
    for key in ("prompt", "category", "id"):
        named = mapping.get(key)
        # A category may join several columns (CoCoNot's category and subcategory).
        names: list[Any] = named if key == "category" and isinstance(named, list) and named \
            else [named]
        for column in names:
            if column is not None and not isinstance(column, str):
                raise ConfigError(f"{path}: {key}: expected a column name, got {column!r}")
            if key == "prompt" and column not in columns and messages_col not in columns:
                raise ConfigError(f"{path}: prompt: missing column {column!r} "
                                  f"(columns: {', '.join(sorted(columns))})")
            # A column the suite names must exist; the default names (inline rows) may be absent.
            if key != "prompt" and column and column not in columns and (
                    column != key or key in explicit):
                raise ConfigError(f"{path}: {key}: missing column {column!r} "
                                  f"(columns: {', '.join(sorted(columns))})")
    expect_of = _expectation_rule(path, mapping.get("expect"), columns)
    prompt_col = mapping["prompt"]
    named_category = mapping.get("category") or "category"
    category_cols = named_category if isinstance(named_category, list) else [named_category]
    id_col = mapping.get("id")
    cases: list[PromptCase] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        prompt = row.get(prompt_col) or ""
        history, prompt = _conversation(path, index, prompt, row.get(messages_col) or "")
        if len(prompt) > PROMPT_LIMIT:
            raise ConfigError(f"{path}: row {index}: a prompt of {len(prompt):,} characters, "
                              f"more than the {PROMPT_LIMIT:,} one may hold")
        for column in (prompt_col, *category_cols, id_col):  # a JSONL source's escapes
            if column and has_lone_surrogate(row.get(column) or ""):
                raise ConfigError(f"{path}: row {index}: {column}: {LONE_SURROGATE_ERROR}")
        category = " / ".join(part for part in (
            (row.get(column) or "").strip() for column in category_cols) if part)
        category = category or "uncategorised"
        raw_id = row.get(id_col) if id_col else None
        for shown, value in (("a category", category), ("an id", raw_id or "")):
            if len(value) > defaults.NAME_LIMIT:  # shown in every node id and gate row
                raise ConfigError(f"{path}: row {index}: {shown} of {len(value):,} characters, "
                                  f"more than the {defaults.NAME_LIMIT} one may hold")
        case_id = safe_id(raw_id) if raw_id else f"{safe_id(category)}-{index:04d}"
        if case_id in seen:
            raise ConfigError(f"{path}: rows {seen[case_id]} and {index} have the same id "
                              f"{case_id!r}; ids must be unique")
        seen[case_id] = index
        cases.append(PromptCase(suite, case_id, prompt, expect_of(index, row), category,
                                history=history))
    return cases


def _conversation(path: Path, index: int, prompt: str, messages: str) -> tuple[History, str]:
    """A row's history and prompt: its `messages` (the last turn the user's, the prompt), or
    its `prompt` alone; never both."""
    if not messages.strip():
        if not prompt.strip():
            raise ConfigError(f"{path}: row {index}: empty prompt")
        return (), prompt
    if prompt.strip():
        raise ConfigError(f"{path}: row {index}: give prompt or messages, not both (the "
                          "prompt is the last user turn of the messages)")
    return split_final(parse_turns(messages, f"{path}: row {index}", final_user=True))


def _where(path: Path, rule: Any, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows whose columns hold one of the values `where` names for them (CoCoNot's
    safety-concern requests out of its five kinds)."""
    if rule is None:
        return rows
    if not isinstance(rule, dict) or not rule or not all(
            isinstance(column, str) for column in rule):
        raise ConfigError(f"{path}: where: expected {{COLUMN: [VALUES]}}")
    wanted = {column: {str(value) for value in _as_list(values)}
              for column, values in rule.items()}
    for column in wanted:
        if rows and column not in rows[0]:
            raise ConfigError(f"{path}: where: missing column {column!r} "
                              f"(columns: {', '.join(sorted(rows[0]))})")
    kept = [row for row in rows
            if all(row.get(column) in values for column, values in wanted.items())]
    if not kept:
        raise ConfigError(f"{path}: where: no row matches {terminal_text(repr(rule), 200)}")
    return kept


def _expectation_rule(path: Path, rule: Any,
                      columns: set[str]) -> Callable[[int, dict[str, str]], Expectation]:
    if isinstance(rule, str):
        if rule not in EXPECTATIONS:
            raise ConfigError(f"{path}: expect: {rule!r} is not allowed "
                              "(allowed: comply, refuse, or {column: NAME, refuse_when: [VALUES]})")
        constant: Expectation = rule
        return lambda _index, _row: constant
    if isinstance(rule, dict):
        column = rule.get("column")
        unknown = set(rule) - {"column", "refuse_when", "comply_when"}
        if unknown or not isinstance(column, str):
            raise ConfigError(f"{path}: expect: expected {{column: NAME, refuse_when: [VALUES]}}")
        if column not in columns:
            raise ConfigError(f"{path}: expect.column: missing column {column!r} "
                              f"(columns: {', '.join(sorted(columns))})")
        refuse_when = rule.get("refuse_when")
        if refuse_when is None:
            # No mapping: the column holds comply/refuse itself.
            def direct(index: int, row: dict[str, str]) -> Expectation:
                value = (row.get(column) or "").strip().lower()
                if value not in EXPECTATIONS:
                    raise ConfigError(f"{path}: row {index}: {column}={value!r} is not "
                                      "comply or refuse (or map it with refuse_when)")
                return value
            return direct
        refuse_values = {str(v).lower() for v in _as_list(refuse_when)}
        return lambda _i, row: ("refuse" if (row.get(column) or "").strip().lower()
                                in refuse_values else "comply")
    raise ConfigError(f"{path}: expect: missing (comply, refuse, or {{column: NAME, "
                      "refuse_when: [VALUES]}})")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _filter_categories(path: Path, cases: list[PromptCase],
                       categories: Sequence[str]) -> list[PromptCase]:
    """Keep the named categories; the plugin checks each name matched some suite."""
    if not categories:
        return cases
    return [case for case in cases if case.category in categories]


def _subset_key(path: Path, data: dict[str, Any]) -> str:
    """`subset`, or its old spelling `sample` (one release, with a warning at its line)."""
    if OLD_SUBSET_KEY not in data:
        return SUBSET_KEY
    if SUBSET_KEY in data:
        raise ConfigError(f"{path}: give {SUBSET_KEY} only ({OLD_SUBSET_KEY} is its old name)")
    import warnings

    warnings.warn_explicit(f"{path.name}: {OLD_SUBSET_KEY}: is deprecated and will be removed "
                           f"in the next release: use {SUBSET_KEY}:", FutureWarning, str(path),
                           _line_of_key(path, OLD_SUBSET_KEY))
    return OLD_SUBSET_KEY


def _line_of_key(path: Path, key: str) -> int:
    """The line (1-based) of a top-level key of a YAML file; 0 when not found."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 0
    return next((n for n, line in enumerate(lines, start=1)
                 if line.partition(":")[0].strip("\"' ") == key and not line[:1].isspace()), 0)


def _suite_subset(path: Path, data: dict[str, Any]) -> tuple[int | float | None, int]:
    """The suite's own subset: its size (None: every row) and seed."""
    key = _subset_key(path, data)
    subset = data.get(key)
    if subset is None:
        return None, 0
    if not isinstance(subset, dict):
        raise ConfigError(f"{path}: {key}: expected {{n: COUNT or FRACTION, seed: INT}}")
    check_known_keys(subset, SAMPLE_KEYS, f"{path}: {key}.")
    stratify = subset.get("stratify", "category")
    if stratify != "category":  # the one stratum there is: a prompt's category
        raise ConfigError(f"{path}: {key}.stratify: {terminal_text(repr(stratify), 60)} is "
                          "not allowed (allowed: category)")
    # a bad seed is an error even when --orbench-random-seed overrides it
    seed = subset.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{path}: {key}.seed: expected a whole number >= 0, got "
                          f"{terminal_text(repr(seed), 60)}")
    from orbench_pytest.catalog.sampling import parse_sample

    try:
        return parse_sample(str(subset.get("n"))), seed
    except ConfigError as exc:
        raise ConfigError(f"{path}: {key}.n: {exc}") from None
