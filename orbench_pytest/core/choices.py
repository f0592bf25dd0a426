"""Allowed values of the options that name a choice, defined once and free of imports: the
option table's help text (imported at every pytest start), the settings' checks and suite
files all read them here."""

from __future__ import annotations

JUDGE_NAMES = ("keyword", "llm", "hybrid", "llm-paper", "hybrid-paper")
