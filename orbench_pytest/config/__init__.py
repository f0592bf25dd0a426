"""Options, settings and the one home of every default."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = ["arg_types", "model_choice", "options", "settings"]
