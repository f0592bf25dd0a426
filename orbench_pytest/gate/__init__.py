"""The gate: rates, thresholds, baselines and the decision (its formulas: core/statistics.py)."""
