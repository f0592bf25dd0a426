"""Reports of a finished run: results file, JUnit, Markdown, terminal summary, plot, HTML page."""
