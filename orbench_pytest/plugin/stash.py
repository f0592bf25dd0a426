"""Where a pytest process keeps its orbench state: one stash key, read by items and hooks.

Items see that state through `ItemSource` only, so items.py never imports session.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from orbench_pytest.catalog.collection import SuiteCatalog
    from orbench_pytest.config.settings import Settings
    from orbench_pytest.gate.disputed import Disputes
    from orbench_pytest.run.runner import ItemState


class ItemSource(Protocol):
    """What items.py uses of the session (implemented by session.OrbenchSession)."""

    settings: Settings

    def catalog(self) -> SuiteCatalog: ...

    def suite_markers(self, suite: str) -> list[str]: ...

    def disputes(self) -> Disputes: ...

    def item_state(self, nodeid: str) -> ItemState: ...


# session.shouldfail when an item finds the run stopped (endpoint unavailable): a worker's
# session carries it back to the xdist controller, which recognises it by this prefix.
STOP_PREFIX = "orbench: "

SESSION_KEY = pytest.StashKey[ItemSource]()


def orbench_session(config: pytest.Config) -> ItemSource:
    return config.stash[SESSION_KEY]
