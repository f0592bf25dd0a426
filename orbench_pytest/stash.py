"""Where a pytest process keeps its orbench state: one stash key, read by items and hooks.

Items see that state through `ItemSource` only, so items.py never imports session.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from .collection import SuiteCatalog
    from .runner import ItemState
    from .settings import Settings


class ItemSource(Protocol):
    """What plugin.py and items.py use of the session (implemented by session.OrbenchSession)."""

    settings: Settings

    def is_suite_candidate(self, path: Path) -> bool: ...

    def catalog(self) -> SuiteCatalog: ...

    def item_state(self, nodeid: str) -> ItemState: ...

    def close(self) -> None: ...


# session.shouldfail when an item finds the run stopped (endpoint unavailable): a worker's
# session carries it back to the xdist controller, which recognises it by this prefix.
STOP_PREFIX = "orbench: "

SESSION_KEY = pytest.StashKey[ItemSource]()


def orbench_session(config: pytest.Config) -> ItemSource:
    return config.stash[SESSION_KEY]
