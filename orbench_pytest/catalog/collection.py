"""Collection: which YAML files are suites, each suite parsed once, and the items a suite yields.

`suite_entries` is the one place that turns a suite into item names: pytest collection uses it
to build items, the xdist controller (which collects nothing itself) to map the workers' node
ids back to prompts (run/xdist_handoff.selected_from_ids).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

from orbench_pytest.catalog.suites import (
    Suite,
    SuiteOptions,
    is_suite_document,
    load_suite,
    read_suite_document,
)
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import item_name
from orbench_pytest.core.paths import resolved
from orbench_pytest.core.types import PromptCase


class Named(Protocol):
    @property
    def name(self) -> str: ...


V = TypeVar("V", bound=Named)  # a variant (config.settings.Variant): its name is in the item's


def suite_entries(suite: Suite, variants: Iterable[V]) -> Iterator[tuple[str, PromptCase, V]]:
    """(item name, case, variant) of every item the suite yields, in collection order."""
    variants = tuple(variants)
    for case in suite.cases:
        for variant in variants:
            yield item_name(suite.name, case.case_id, variant.name), case, variant


class SuiteCatalog:
    """The suites of one pytest process, each parsed once."""

    def __init__(self, options: SuiteOptions, explicit: frozenset[Path]) -> None:
        self._options = options
        self._explicit = explicit
        self._suites: dict[Path, Suite | None] = {}

    def load(self, path: Path) -> Suite:
        """The suite in `path`; an empty Suite for other YAML in suites/."""
        key = resolved(path)
        if key not in self._suites:
            data = read_suite_document(path)
            if not is_suite_document(data):
                if key in self._explicit:
                    raise ConfigError(f"{path}: not a suite file (needs name, and prompts or "
                                      "source)")
                self._suites[key] = None
            else:
                self._suites[key] = load_suite(path, self._options, data)
        suite = self._suites[key]
        return suite if suite is not None else Suite(name="", path=path)

    @property
    def suites(self) -> list[Suite]:
        return [suite for suite in self._suites.values() if suite is not None]

    def prompt_ids(self) -> dict[str, frozenset[str]]:
        """Each suite's prompt ids, as it defines them (what a disputed prompt may name)."""
        return {suite.name: suite.ids for suite in self.suites}

    def known_categories(self) -> list[str]:
        return sorted({c for suite in self.suites for c in suite.categories})
