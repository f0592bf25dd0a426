"""Asking the target: requests, the fetch engine, targets, the cache, the embedded model."""
