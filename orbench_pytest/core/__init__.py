"""Plain data, errors, ids, safe output and the statistics (statistics.py: every formula with its
source) shared by every zone (no pytest, no IO beyond bounded reads and atomic writes).
"""
