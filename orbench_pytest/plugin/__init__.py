"""The pytest layer: the only zone that imports pytest."""

# The pytest11 entry point (pyproject.toml); no other zone imports this one, and the rest
# are this zone's own (tests/test_package_shape.py checks it).
__all__ = ["hooks"]
