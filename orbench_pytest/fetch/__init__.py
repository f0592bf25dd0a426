"""Asking the target: requests, the fetch engine, targets, the cache, the embedded model."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "cache", "cache_merge", "concurrency", "costs", "endpoints", "engine", "fingerprint",
    "freshness", "local_model", "progress", "requests", "retry", "targets", "wait_headers",
]
