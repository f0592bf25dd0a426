"""Suites: files, ready suites, data sources, sampling, shards, collection."""
