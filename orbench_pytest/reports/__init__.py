"""Reports of a finished run: results file, JUnit, Markdown, terminal summary, plot, HTML page."""

# The modules other zones import (tests/test_package_shape.py checks each import against
# this list); the others are this zone's own.
__all__ = [
    "cost", "document", "html", "junit", "markdown", "plot", "results", "rewordings", "summary",
]
