"""One thresholds file for any subset of suites: what it may name that this run lacks.

A suite named in the file must be a suite of this run (collected, even if deselected) or a
ready suite's name (a team runs a subset with its one file); anything else is a typo that
would gate nothing, so it is an error naming the key. A category gated for a suite that runs
must exist in that suite's prompts: a gate on a category no prompt has would never fire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.gate.thresholds import Thresholds


def check_gated_categories(thresholds: Thresholds,
                           categories_of: Mapping[str, Sequence[str]]) -> None:
    """`categories_of`: every category of each suite in this run (before any sampling)."""
    for suite, category in sorted(thresholds.categories):
        known = categories_of.get(suite)
        if known is not None and category not in known:
            raise ConfigError(f"{thresholds.source}: suites.{suite}.categories.{category}: no "
                              f"prompt of {suite} has this category (categories: "
                              f"{', '.join(sorted(known))})")


def check_gated_suites(thresholds: Thresholds, run_suites: Iterable[str],
                       ready_names: Iterable[str]) -> None:
    """A suite key that names no suite of the run and no ready suite: a one-line error."""
    known = set(run_suites)
    ready = set(ready_names)
    named = [*thresholds.suites, *(suite for suite, _ in thresholds.categories)]
    for suite in dict.fromkeys(named):
        if suite not in known and suite not in ready:
            raise ConfigError(
                f"{thresholds.source}: suites.{suite}: no suite of this run and no ready suite "
                f"is named {suite!r} (this run: {', '.join(sorted(known)) or 'none'}; ready: "
                f"{', '.join(sorted(ready))})")
