"""The one home of an item's id: how a (suite, variant, case) names its test item, and back;
and what a name or id a user writes may hold."""

from __future__ import annotations

import re

ItemKey = tuple[str, str, str]  # suite, variant ("" for the default), case id
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a suite's or variant's: letters, digits, -_.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # an environment variable's
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def is_local_model(name: str) -> bool:
    """`local` / `local:<name>`: the embedded model, not a model on an endpoint."""
    return name == "local" or name.startswith("local:")


def safe_id(value: str) -> str:
    """An id selectable with -k: only letters, digits, '_', '.', '-'."""
    return _UNSAFE_ID_CHARS.sub("-", value.strip()).strip("-").lower() or "x"


def item_name(suite: str, case_id: str, variant: str = "") -> str:
    """The item's name as pytest shows it: suite[variant:case] or suite[case]."""
    return f"{suite}[{variant}:{case_id}]" if variant else f"{suite}[{case_id}]"


def group_name(suite: str, variant: str = "") -> str:
    """A suite, or one variant of it, as tables and messages name it: suite or suite[variant]."""
    return f"{suite}[{variant}]" if variant else suite


def key_label(key: ItemKey) -> str:
    suite, variant, case_id = key
    return item_name(suite, case_id, variant)


def parse_item_name(name: str, suite: str, variant: str = "") -> str:
    """The case id inside an item name made by item_name; the name itself if it is not one."""
    inner = name[len(suite) + 1:-1] if name.startswith(suite + "[") and name.endswith("]") else name
    if variant and inner.startswith(variant + ":"):
        return inner[len(variant) + 1:]
    return inner


def item_nodeid(file_nodeid: str, name: str) -> str:
    """The item's node id, given to pytest as text. pytest 9 keeps node ids structured (path,
    names, params) and reads a stored id such as `suites/x.yaml::smoke[case]` (the --lf, --ff
    and --sw caches, node ids on the command line) as name `smoke` with params `case`; built
    from this same text, the item's structured id equals the stored one. pytest 8 compares
    the text itself."""
    return f"{file_nodeid}::{name}"


ORBENCH_MARKER = "orbench"  # every prompt item: -m orbench, -m "not orbench"
_NOT_IDENTIFIER = re.compile(r"\W")


def suite_marker(suite: str) -> str:
    """A suite's marker: its name as an identifier (or-bench-hard-1k → or_bench_hard_1k), so
    that `-m or_bench_hard_1k` parses."""
    marker = _NOT_IDENTIFIER.sub("_", suite)
    return marker if not marker[0].isdigit() else f"_{marker}"
