"""Asking the target: requests, the fetch engine, targets, the models an endpoint serves, the
cache, the embedded model, what the requests spent."""
