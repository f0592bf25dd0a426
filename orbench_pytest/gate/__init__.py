"""The gate: rates, thresholds, baselines and the decision (its formulas: core/statistics.py)."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = ["baseline", "calibration", "decision", "disputed", "samples", "scope", "thresholds"]
