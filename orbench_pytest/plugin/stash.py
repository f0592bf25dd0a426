"""Where a pytest process keeps its orbench state: one stash key, read by items and hooks.

Items see that state through `ItemSource` only, and the session's companion plugins
(session_reports.py, xdist_hooks.py) through `RunSource`, so none of them imports session.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from orbench_pytest.catalog.collection import SuiteCatalog
    from orbench_pytest.config.settings import Settings
    from orbench_pytest.core.errors import BatchEnded
    from orbench_pytest.gate.disputed import Disputes
    from orbench_pytest.run.runner import ItemState, Selected
    from orbench_pytest.run.session_run import CompletedRun


class ItemSource(Protocol):
    """What items.py uses of the session (implemented by session.OrbenchSession)."""

    settings: Settings

    def catalog(self) -> SuiteCatalog: ...

    def suite_markers(self, suite: str) -> list[str]: ...

    def disputes(self) -> Disputes: ...

    def item_state(self, nodeid: str) -> ItemState: ...


class RunSource(ItemSource, Protocol):
    """What the session's companion plugins use of it (implemented by session.OrbenchSession):
    the run it started and how that run ended."""

    config: pytest.Config
    is_worker: bool
    run: CompletedRun | None  # a run that fetched and decided its gate
    ended: BatchEnded | None  # the run ended after a batch step (no item runs, no gate)
    empty_shard: bool  # --orbench-shard=K/N deselected every prompt collected

    @property
    def prompt_item(self) -> type[pytest.Item] | None:
        """The prompts' item class, once a suite is collected in this process."""

    @property
    def collected(self) -> SuiteCatalog | None:
        """The catalog, once a suite is collected in this process."""

    def start(self, everything: list[Selected]) -> None: ...

    def stop_on_collection_errors(self) -> None: ...

    def is_prompt(self, nodeid: str) -> bool: ...


# session.shouldfail when an item finds the run stopped (endpoint unavailable): a worker's
# session carries it back to the xdist controller, which recognises it by this prefix.
STOP_PREFIX = "orbench: "

SESSION_KEY = pytest.StashKey[ItemSource]()


def orbench_session(config: pytest.Config) -> ItemSource:
    return config.stash[SESSION_KEY]
