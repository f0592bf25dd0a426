"""Plain data, errors, ids and safe output shared by every zone (no pytest, no IO beyond
bounded reads and atomic writes).
"""
