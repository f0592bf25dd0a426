"""Options, settings and the one home of every default."""
