"""The OpenAI Batch API: export, import, submit, wait."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = ["api", "format", "import_answers", "state"]
