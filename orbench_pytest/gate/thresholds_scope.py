"""One thresholds file for any subset of suites: what it may name that this run lacks.

A suite named in the file must be a suite of this run (collected, even if deselected) or a
ready suite's name (a team runs a subset with its one file); anything else is a typo that
would gate nothing, so it is an error naming the key. A category gated for a suite that runs
must exist in that suite's prompts: a gate on a category no prompt has would never fire.
Disputed prompts (thresholds.yaml's `disputed:`, disputed.yaml) follow the same scope: a suite
this run does not include is not checked (a ready suite, or one of yours run another time),
but a prompt id that no prompt of a suite in the run has is a typo that would dispute nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping, Sequence

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import terminal_text
from orbench_pytest.gate.disputed import Disputes
from orbench_pytest.gate.thresholds import Thresholds

SHOWN_IDS = 3  # the nearest ids an error suggests


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


def check_disputed_prompts(disputes: Disputes,
                           prompt_ids: Mapping[str, Collection[str]]) -> None:
    """`prompt_ids`: every prompt id of each suite in this run, as the suite defines them
    (before sampling and --orbench-category: a prompt left out of this run may be disputed)."""
    for suite, entries in disputes.items():
        known = prompt_ids.get(suite)
        if known is None:
            continue
        for case_id, dispute in entries.items():
            if case_id in known:
                continue
            near = difflib.get_close_matches(case_id, sorted(known), n=SHOWN_IDS)
            hint = f"; nearest: {', '.join(near)}" if near else ""
            raise ConfigError(terminal_text(
                f"{dispute.key}: no prompt of suite {suite} has the id {case_id!r} (allowed: "
                f"the id of one of its {len(known):,} prompts{hint}; a suite this run does "
                "not include is not checked)"))
