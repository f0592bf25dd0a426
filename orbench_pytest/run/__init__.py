"""One run without pytest: selection → answers → verdicts → gate → outcomes."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "prompt_asker", "run_document", "runner", "session_run", "xdist_handoff",
]
