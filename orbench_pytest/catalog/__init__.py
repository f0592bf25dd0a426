"""Suites: files, ready suites, data sources, sampling, shards, collection."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "collection", "datasets", "paths", "ready", "rewording_edits", "sampling", "selection",
    "shards", "suites",
]
