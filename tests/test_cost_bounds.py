"""Issue 43 point 2 (prices and usage): a price or a token count beyond any real value is a
one-line error (a user's price) or ignored with a warning (a provider's usage), and the results
file and the JUnit gate stay strict JSON that `orbench report` reads back."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.cli.main import main
from orbench_pytest.config.settings import build_settings
from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.typed_json import dump, load
from orbench_pytest.fetch.costs import Spending
from orbench_pytest.reports.cost import Prices, RunCost
from tests import hostile_server as hs
from tests.helpers import SAFE, cases, run_orbench, write_suite


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", ["1e308", "1e400", "inf", "10001"])
@pytest.mark.parametrize("option", ["price_input", "price_output"])
def test_a_price_beyond_any_real_one_is_a_one_line_error(pytester, plugin_args, option: str,
                                                         value: str) -> None:
    flag = "--orbench-" + option.replace("_", "-")
    write_suite(pytester, cases([SAFE[0]]), "one")
    result = run_orbench(pytester, plugin_args, f"{flag}={value}", model="m")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: {flag}: {value!r} is not a number between 0 and "
        f"{defaults.MAX_PRICE_PER_M:g} (dollars per million tokens)"]


def test_a_provider_usage_beyond_any_real_count_is_ignored_with_a_warning(
        pytester, plugin_args, capsys) -> None:
    write_suite(pytester, cases([SAFE[0]]), "one")
    huge = {"prompt_tokens": 10**38, "completion_tokens": 10**38}
    with hs.HostileServer(lambda prompt: hs.completion(usage=huge, text="Sure: do this.")) as s:
        result = run_orbench(pytester, plugin_args, "--orbench-price-input=1000",
                             "--orbench-price-output=2000", "--orbench-results=r.json",
                             "--junitxml=r.xml", url=s.url)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "cost: * (estimated for 1 of 1 answers: 1 usage past 10,000,000 tokens ignored)*"])
    data = strict_json((pytester.path / "r.json").read_text())
    assert data["run"]["cost"]["prompt_tokens"] < 10**7
    assert data["run"]["cost"]["ignored_usage"] == 1
    capsys.readouterr()
    assert main(["report", str(pytester.path / "r.xml")]) == 0
    assert "ignored" in capsys.readouterr().out


usage_value = st.one_of(st.none(), st.booleans(), st.integers(-10**40, 10**40),
                        st.floats(), st.text(max_size=8))
price_text = st.one_of(st.floats().map(repr), st.integers(-10, 10**12).map(str),
                       st.sampled_from(["inf", "-inf", "nan", "1e308", "1e400", "Infinity"]))


@given(st.lists(st.tuples(usage_value, usage_value, st.text(max_size=50)), max_size=12),
       price_text, price_text)
def test_any_cost_inputs_give_strict_json_that_reads_back(answers, price_in: str,
                                                          price_out: str) -> None:
    try:
        settings = build_settings({"orbench_price_input": price_in,
                                   "orbench_price_output": price_out}, env={})
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    spent = Spending()
    tokens = spent.of("prompts").tokens
    for prompt, completion, text in answers:
        tokens.add({"prompt_tokens": prompt, "completion_tokens": completion}, text, text)
    spent.of("prompts").requests = len(answers)
    reports = settings.reports
    cost = RunCost.of(spent, 0, 1.0, Prices(reports.price_input, reports.price_output))
    text = json.dumps(dump(cost), allow_nan=False)
    assert load(RunCost, strict_json(text), "r.json") == cost
    assert cost.usd is None or math.isfinite(cost.usd)
    assert "inf" not in cost.line() and "nan" not in cost.line()
