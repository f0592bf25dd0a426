"""The `orbench` command: compare (Spearman), argument errors, the entry point."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest

from orbench_pytest.cli.main import main
from orbench_pytest.reports.plot import published_spearman
from tests import helpers
from tests.helpers import REPO, orbench_cli, results_file
from tests.openai_server import OpenAIServer


def test_published_models_reproduce_the_papers_correlation() -> None:
    # OR-Bench reports 0.89 across its 32 models.
    assert round(published_spearman(), 2) == 0.89


def test_compare_prints_each_run_and_the_correlation(tmp_path: Path, capsys) -> None:
    files = [results_file(tmp_path / "a.json", 1, 6), results_file(tmp_path / "b.json", 3, 8),
             results_file(tmp_path / "c.json", 5, 7), results_file(tmp_path / "d.json", 8, 10)]
    assert main(["compare", *map(str, files), "--published"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["a", "10.0%", "60.0%"]
    # x ranks 1 2 3 4, y ranks 1 3 2 4: ρ = 0.8
    assert out[5] == "Spearman rho (toxic refusal vs over-refusal, 4 runs): 0.800"
    assert out[6].startswith("Spearman rho over the 32 published OR-Bench models: 0.893")


def run_names(lines: list[str]) -> list[str]:
    """The run column of compare's table of two runs."""
    return [re.split(r"\s{2,}", line)[0] for line in lines[1:3]]


def test_compare_of_one_or_two_real_runs_labels_each_by_what_differs(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """Runs of one model against the local server: one and two runs compare (exit 0), each
    labelled by what tells it from the others, never two by the model name alone."""
    helpers.mini_suite(pytester, {"defaults": {"max_over_refusal": 0.5}}, safe=helpers.SAFE[:4],
                       toxic=helpers.TOXIC[:2])
    with OpenAIServer(helpers.refusing(helpers.TOXIC[:2] + helpers.SAFE[:1])) as server:
        for name, args in (("plain", []), ("brief", ["--orbench-system-prompt=Be brief."]),
                           ("v2", ["--orbench-target-version=v2"]), ("again", [])):
            helpers.run_orbench(pytester, plugin_args, f"--orbench-results={name}.json",
                                *args, url=server.url).assert_outcomes(passed=5, xfailed=1)
    compare = partial(orbench_cli, "compare", cwd=pytester.path)
    one = compare("plain.json")
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[1].split() == ["m", "25.0%", "100.0%"]
    assert "needs at least 3 runs (got 1)" in one.stdout
    two = compare("plain.json", "brief.json")
    assert two.returncode == 0, two.stderr
    lines = two.stdout.splitlines()
    assert run_names(lines) == [
        "m (no system prompt)", "m (system prompt 'Be brief.')"]
    assert lines[3] == ("m (system prompt 'Be brief.') against m (no system prompt): "
                        "over-refusal +0.0 points, toxic refused +0.0 points")
    versions = compare("plain.json", "v2.json").stdout.splitlines()
    assert run_names(versions) == [
        "m (no version)", "m (version v2)"]
    same = compare("plain.json", "again.json").stdout.splitlines()
    assert run_names(same) == [
        "m (plain.json)", "m (again.json)"]


def test_compare_without_input_is_an_error(capsys) -> None:
    assert main(["compare"]) == 2
    assert capsys.readouterr().err == ("orbench compare: error: give results files to "
                                       "compare, or --published\n")


def test_argument_errors_exit_2_with_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["serve-local", "--threads", "0"])
    assert exc.value.code == 2
    assert "'0' is not a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def test_module_runs_as_a_command(tmp_path: Path) -> None:
    done = orbench_cli("compare", "--published", cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "0.893" in done.stdout
