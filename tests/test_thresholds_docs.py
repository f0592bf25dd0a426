"""docs/thresholds.md's reference table is generated from the code: one home per default."""

from __future__ import annotations

import re
from pathlib import Path

from orbench_pytest.gate.thresholds import KEY_SPECS, key_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "thresholds.md"
BLOCK = re.compile(r"<!-- BEGIN generated: orbench_pytest.gate.thresholds.key_table -->\n(.*?)\n"
                   r"<!-- END generated -->", re.S)


def test_the_reference_table_is_the_generated_one() -> None:
    found = BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found is not None, f"{DOC}: the generated-table markers are missing"
    expected = "\n".join(key_table())
    assert found.group(1) == expected, (
        f"{DOC} is stale: replace the table between the markers with:\n{expected}")


def test_every_key_the_parser_accepts_is_in_the_table() -> None:
    from orbench_pytest.gate.thresholds import CATEGORY_KEYS, DEFAULT_KEYS, SUITE_KEYS, TOP_KEYS

    documented = {spec.key for spec in KEY_SPECS}
    accepted = ({*DEFAULT_KEYS, *SUITE_KEYS, *CATEGORY_KEYS, *TOP_KEYS}
                - {"categories", "defaults", "suites"})
    assert accepted == documented
    table = "\n".join(key_table())
    assert "| `max_regressions` | no limit |" in table
    assert "| `max_over_refusal` | 10% |" in table
