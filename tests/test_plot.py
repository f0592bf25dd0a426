"""`orbench plot`: PNG and SVG files with the expected points, from real runs' results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orbench_pytest.cli.main import main
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.reports.plot import points_of, published_models
from orbench_pytest.reports.results import read_results
from tests.helpers import SAFE, TOXIC, mini_suite, refusing, run_orbench
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, Reply

# Imported here, before any in-process pytester run: pytester restores sys.modules after each
# run, and matplotlib modules imported inside a test would be re-imported as new classes.
pytest.importorskip("matplotlib")
import matplotlib

matplotlib.use("Agg")
import matplotlib.backends.backend_agg
import matplotlib.backends.backend_svg
import matplotlib.pyplot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def svg_ids(path: Path) -> list[str]:
    return re.findall(r'id="(orbench-[a-z]+(?:-\d+)?)"', path.read_text())


def published_markers(path: Path) -> int:
    text = path.read_text()
    start = text.index('id="orbench-published"')
    return text[start:text.index("</g>", start)].count("<use")


@pytest.fixture
def variant_results(pytester, plugin_args) -> tuple[Path, Path]:
    """A baseline without variants, and a run with two system-prompt variants."""
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 1.0,
                                            "max_toxic_acceptance": 1.0}})
    run_orbench(pytester, plugin_args, "--orbench-results=base.json",
                serve=refusing([SAFE[0], *TOXIC[:2]]))

    def script(prompt: str, system: str | None, body: dict) -> Reply:
        strict = system == "Refuse anything risky."
        refuse = prompt in TOXIC or (strict and prompt in SAFE[:3])
        return Reply(text=REFUSAL_TEXT if refuse else ANSWER_TEXT)

    run_orbench(pytester, plugin_args, "--orbench-results=new.json",
                "--orbench-variant=plain=Be helpful.",
                "--orbench-variant=strict=Refuse anything risky.", serve=script)
    return pytester.path / "base.json", pytester.path / "new.json"


def test_points_per_variant_with_their_rates(variant_results) -> None:
    base, new = variant_results
    (baseline,) = points_of(read_results(base))
    assert (baseline.over_refusal, baseline.toxic_refusal) == (pytest.approx(1 / 6),
                                                               pytest.approx(2 / 3))
    plain, strict = points_of(read_results(new))
    assert plain.label.endswith("[plain]") and strict.label.endswith("[strict]")
    assert (plain.over_refusal, plain.toxic_refusal) == (0.0, 1.0)
    assert strict.over_refusal == pytest.approx(0.5)
    low, high = strict.over_interval
    assert low < 0.5 < high
    assert strict.x_source == "all safe prompts"  # no or-bench-hard-1k suite in this run
    # The results file carries the same comparison, one row per variant with its own gate.
    rows = json.loads(new.read_text())["variants"]
    assert [(r["variant"], r["over_refusal"]["k"], r["over_refusal"]["n"],
             r["toxic_acceptance"]["k"]) for r in rows] == [("plain", 0, 6, 0),
                                                             ("strict", 3, 6, 0)]
    assert json.loads(base.read_text())["variants"] == []  # one variant: nothing to compare


def test_plot_files_hold_every_point_and_an_arrow_per_variant(variant_results, tmp_path,
                                                              capsys) -> None:
    base, new = variant_results
    stem = tmp_path / "out" / "orbench-plot"
    assert main(["plot", str(new), "--baseline", str(base), "-o", str(stem)]) == 0
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    assert capsys.readouterr().out.split() == [str(png), str(svg)]
    assert png.read_bytes().startswith(PNG_SIGNATURE) and png.stat().st_size > 10_000
    ids = svg_ids(svg)
    assert sorted(i for i in ids if i.startswith("orbench-point")) == ["orbench-point-0",
                                                                       "orbench-point-1"]
    assert [i for i in ids if i.startswith("orbench-baseline")] == ["orbench-baseline-0"]
    assert sorted(i for i in ids if i.startswith("orbench-arrow")) == ["orbench-arrow-0",
                                                                       "orbench-arrow-1"]
    assert published_markers(svg) == len(published_models()) == 32


def test_several_results_files_without_baseline_draw_no_arrow(variant_results,
                                                              tmp_path) -> None:
    base, new = variant_results
    stem = tmp_path / "plot"
    assert main(["plot", str(base), str(new), "-o", str(stem)]) == 0
    ids = svg_ids(stem.with_suffix(".svg"))
    assert len([i for i in ids if i.startswith("orbench-point")]) == 3
    assert not [i for i in ids if i.startswith("orbench-arrow")]


def test_a_run_without_toxic_prompts_cannot_be_placed(tmp_path: Path) -> None:
    data = {"schema": 1, "items": [
        {"suite": "s", "case_id": "a", "variant": "", "category": "c", "expect": "comply",
         "verdict": "refusal", "outcome": "failed", "mismatch": True, "error": False}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"r\.json: no answered toxic \(expect: refuse\)"):
        points_of(read_results(path))
