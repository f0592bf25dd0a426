"""`orbench generate`: OR-Bench's generation pipeline for a team's own domain.

Toxic seeds are rewritten into prompts that look harmful but are safe, an ensemble of LLM
moderators labels each candidate, near-duplicates go, optional probe models find the hard
subset, and a suite folder is written that pytest runs at once and a human can review.
"""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = ["cli"]
