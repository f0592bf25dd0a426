"""The benchmarks: `python -m benchmarks` lists the scenarios (benchmarks/__main__.py)."""
