"""Collection: which YAML files are suites, each suite parsed once, and the items a suite yields.

`suite_entries` is the one place that turns a suite into item names: pytest collection uses it
to build items, the xdist controller (which collects nothing itself) to map the workers' node
ids back to prompts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from orbench_pytest.catalog.paths import names_suite_file
from orbench_pytest.catalog.ready import ready_suite_dir
from orbench_pytest.catalog.selection import suite_file_of
from orbench_pytest.catalog.suites import (
    Suite,
    SuiteOptions,
    is_suite_document,
    load_suite,
    read_suite_document,
)
from orbench_pytest.config.settings import Settings, Variant
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import item_name
from orbench_pytest.core.paths import resolved
from orbench_pytest.core.types import PromptCase
from orbench_pytest.run.runner import Selected


def suite_entries(suite: Suite, variants: Iterable[Variant]
                  ) -> Iterator[tuple[str, PromptCase, Variant]]:
    """(item name, case, variant) of every item the suite yields, in collection order."""
    variants = tuple(variants)
    for case in suite.cases:
        for variant in variants:
            yield item_name(suite.name, case.case_id, variant.name), case, variant


class SuiteCatalog:
    """The suites of one pytest process, each parsed once."""

    def __init__(self, settings: Settings, explicit: frozenset[Path]) -> None:
        self._settings = settings
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
                settings = self._settings
                options = SuiteOptions(subset=settings.scope.subset,
                                       seed=settings.scope.random_seed,
                                       categories=settings.scope.categories,
                                       data_dirs=settings.scope.data_dirs,
                                       ready_suite_dir=ready_suite_dir())
                self._suites[key] = load_suite(path, options, data)
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

    def selected_from_ids(self, rootpath: Path, ids: Iterable[str]) -> list[Selected]:
        """xdist controller: the prompts behind the node ids the workers collected."""
        selected = []
        entries: dict[str, dict[str, tuple[PromptCase, Variant]]] = {}
        for nodeid in ids:
            if not names_suite_file(nodeid):
                continue
            path_part, _, name = nodeid.partition("::")
            if path_part not in entries:
                try:
                    suite = self.load(suite_file_of(path_part, rootpath, ready_suite_dir()))
                except ConfigError:
                    suite = None  # the workers report the collection error
                entries[path_part] = {} if suite is None else {
                    item: (case, variant)
                    for item, case, variant in suite_entries(suite, self._settings.target.variants)}
            found = entries[path_part].get(name)
            if found is not None:
                selected.append(Selected(nodeid, *found))
        return selected
