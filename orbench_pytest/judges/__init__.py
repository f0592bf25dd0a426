"""Judges: was an answer a refusal? Offline rules and classifier, LLM judge, agreement with
people.
"""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = ["channel", "check", "judge", "metrics", "stage", "verdicts"]
