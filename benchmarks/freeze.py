"""A pytest plugin freezing the heap for the cyclic collector as orbench did until issue 45:
every 4,096 items collected, after the collection and after the fetch, thawed at the end.
`python -m benchmarks residue --variant freeze` runs with it (`-p benchmarks.freeze`)."""

from __future__ import annotations

import gc

import pytest

_items = [0]


def pytest_itemcollected(item: pytest.Item) -> None:
    if _items[0] % 4096 == 0:
        gc.freeze()
    _items[0] += 1


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()


def pytest_runtest_logstart(nodeid: str) -> None:
    if _items[0] >= 0:  # the first item starts once the fetch is done
        gc.freeze()
        _items[0] = -1


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    gc.unfreeze()
