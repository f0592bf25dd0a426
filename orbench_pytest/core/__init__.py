"""Plain data, errors, ids and safe output shared by every zone (no pytest, no IO beyond
bounded reads and atomic writes).
"""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "artefacts", "bounded", "conversation", "defaults", "errors", "ids", "paths", "redact",
    "typed_json", "types", "untrusted", "yaml_load",
]
