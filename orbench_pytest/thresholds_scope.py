"""One thresholds file for any subset of suites: what it may name that this run lacks.

A suite named in the file but not run is fine (a team runs a subset with its one file). A
category gated for a suite that runs must exist in that suite's prompts: a gate on a category
no prompt has would never fire, so a typo there would pass silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import ConfigError
from .thresholds import Thresholds


def check_gated_categories(thresholds: Thresholds,
                           categories_of: Mapping[str, Sequence[str]]) -> None:
    """`categories_of`: every category of each suite in this run (before any sampling)."""
    for suite, category in sorted(thresholds.categories):
        known = categories_of.get(suite)
        if known is not None and category not in known:
            raise ConfigError(f"{thresholds.source}: suites.{suite}.categories.{category}: no "
                              f"prompt of {suite} has this category (categories: "
                              f"{', '.join(sorted(known))})")
