"""The pytest layer: the only zone that imports pytest."""
