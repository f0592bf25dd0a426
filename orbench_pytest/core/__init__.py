"""Plain data, errors, ids, safe output and the statistics (statistics.py: every formula with its
source) shared by every zone (no pytest, no IO beyond bounded reads and atomic writes).
"""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "artefacts", "bounded", "conversation", "defaults", "errors", "ids", "paths", "redact",
    "statistics", "typed_json", "types", "untrusted", "yaml_load",
]
