"""One run without pytest: selection → answers → verdicts → gate → outcomes."""
