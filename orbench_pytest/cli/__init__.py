"""The `orbench` command."""

# The console script's module (pyproject.toml); no other zone imports this one, and the rest
# are this zone's own (tests/test_package_shape.py checks it).
__all__ = ["main"]
