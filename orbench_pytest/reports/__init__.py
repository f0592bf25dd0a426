"""Reports of a finished run: results file, JUnit, Markdown, terminal summary, cost, plot, HTML
page."""
