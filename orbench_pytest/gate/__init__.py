"""The gate: rates, thresholds, baselines and the statistics behind the decision."""
