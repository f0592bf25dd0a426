"""Adaptive concurrency in the fetch engine, against the real local server: it starts modestly,
grows to the ceiling while answers come back clean, backs off when the server rate-limits by
concurrency, and stays where it is put when pinned or local."""

from __future__ import annotations

import re

import pytest

from orbench_pytest.config.settings import build_settings
from orbench_pytest.fetch.engine import FetchSettings
from orbench_pytest.fetch.progress import ProgressLine
from orbench_pytest.fetch.retry import RetrySettings
from orbench_pytest.fetch.targets import GenerationParams, OpenAICompatibleTarget
from orbench_pytest.judges.judge import OfflineJudge
from orbench_pytest.run.judged_fetch import JudgedFetch, fetch_and_judge
from orbench_pytest.run.runner import fetch_settings, generation_params
from tests.helpers import LENIENT, jobs, questions, run_orbench, write_suite
from tests.openai_server import FirstWave, OpenAIServer

QUICK_RETRY = RetrySettings(backoff_base_s=0.02, backoff_max_s=0.2)


def engine(server: OpenAIServer, seen: list[int] | None = None,
           **settings: object) -> JudgedFetch:
    fetch = FetchSettings(retry=QUICK_RETRY, **settings)  # type: ignore[arg-type]
    target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), fetch.concurrency)

    def progress(done: int, total: int, errors: int, concurrency: int) -> None:
        if seen is not None:
            seen.append(concurrency)

    return JudgedFetch(target, OfflineJudge(), None, fetch, progress)


def test_starts_at_eight_and_doubles_under_the_ceiling_while_answers_come_back_clean() -> None:
    """The first round always doubles (nothing to compare its latency with); how far later
    rounds go depends on latencies a busy machine stretches, rightly: the limit stops growing
    while latency climbs. The climb to the ceiling is test_concurrency.py's, on an injected
    clock."""
    seen: list[int] = []
    with OpenAIServer(latency_s=0.03) as server:
        phase = engine(server, seen, concurrency=32)
        verdicts = fetch_and_judge(phase, jobs(200))
        assert server.max_in_flight <= 32  # never passed
        assert server.requests == 200 and server.rate_limited == 0
    assert not verdicts.errors
    report = phase.report
    assert seen[0] == 8 and seen == sorted(seen)
    assert sorted(set(seen)) in ([8, 16], [8, 16, 32])  # slow start: doubling
    assert report.concurrency_peak in (16, 32) and report.concurrency_cuts == 0


def test_backs_off_when_the_server_rate_limits_by_concurrency() -> None:
    """A server that takes 6 at once answers 429 beyond: the adaptive run is cut below 6 and
    gets a small fraction of the 429s that a run fixed at the same ceiling gets."""
    with OpenAIServer(latency_s=0.02, in_flight_limit=6) as server:
        phase = engine(server, concurrency=32)
        assert not fetch_and_judge(phase, jobs(150, "adaptive")).errors  # all answered in the end
        adaptive, adaptive_429s = phase.report, server.rate_limited
        server.rate_limited = 0
        phase = engine(server, concurrency=32, adaptive=False)
        fetch_and_judge(phase, jobs(150, "fixed"))
        fixed, fixed_429s = phase.report, server.rate_limited
    assert adaptive.concurrency_cuts >= 1
    assert adaptive.retry_reasons.get("HTTP 429", 0) == adaptive_429s
    assert fixed.concurrency_cuts == 0 and fixed.concurrency_peak == 32
    assert adaptive_429s * 4 < fixed_429s


def test_a_pinned_concurrency_never_moves() -> None:
    with OpenAIServer(latency_s=0.02, in_flight_limit=3) as server:
        phase = engine(server, concurrency=5, adaptive=False)
        fetch_and_judge(phase, jobs(30))
        assert server.rate_limited > 0  # pushed back, and yet:
    report = phase.report
    assert (report.concurrency_peak, report.concurrency_cuts) == (5, 0)


def test_defaults_adapt_up_to_64_pinned_and_local_do_not() -> None:
    def settings_for(**values: object) -> FetchSettings:
        settings = build_settings({f"orbench_{k}": v for k, v in values.items()})
        return fetch_settings(settings, generation_params(settings))

    default = settings_for(model="m")
    assert (default.concurrency, default.adaptive) == (64, True)
    pinned = settings_for(model="m", concurrency="16", fixed_concurrency=True)
    assert (pinned.concurrency, pinned.adaptive) == (16, False)
    local = settings_for(model="local", concurrency="32")
    assert (local.concurrency, local.adaptive) == (1, False)  # the embedded model: one slot


def test_a_default_pytest_run_starts_at_eight_and_doubles(pytester, plugin_args) -> None:
    """How far past 16 it grows depends on latencies a busy machine stretches (see above)."""
    write_suite(pytester, questions(150), thresholds=LENIENT)
    wave = FirstWave(8, probe=True)
    with wave as server:
        result = run_orbench(pytester, plugin_args, url=server.url, cache="c.sqlite3")
        assert wave.held == 8  # once the probe is back: the starting limit
        assert server.max_in_flight <= 64
    result.assert_outcomes(passed=150)
    peak = int(re.search(r"concurrency: peak (\d+)", result.stdout.str()).group(1))
    assert 16 <= peak <= 64
    result.stdout.fnmatch_lines(["answers: 150 (0 from cache), * concurrency: peak *"])


def test_fixed_concurrency_option_pins_a_pytest_run(pytester, plugin_args) -> None:
    write_suite(pytester, questions(40), thresholds=LENIENT)
    wave = FirstWave(20, probe=True)
    with wave as server:
        result = run_orbench(pytester, plugin_args, "--orbench-concurrency=20",
                             "--orbench-fixed-concurrency", url=server.url, cache="c.sqlite3")
        assert wave.held == 20  # all of it at once, no slow start
        assert server.max_in_flight == 20
    result.assert_outcomes(passed=40)


@pytest.mark.parametrize("tty", [True, False])
def test_the_progress_line_shows_the_concurrency(tty: bool) -> None:
    written: list[str] = []
    progress = ProgressLine(lambda text, rewrite: written.append(text), tty)
    progress(10, 10, 0, 24)
    assert "concurrency 24" in written[-1]


def test_the_llm_judge_adapts_to_its_own_endpoint(pytester, plugin_args) -> None:
    """The judge's endpoint takes 4 at once: its requests back off on a limit of their own,
    with a fraction of the 429s that a judge pinned at the same ceiling gets."""
    from tests.helpers import judge_args, judge_server

    write_suite(pytester, questions(80), thresholds=LENIENT)
    rate_limited: dict[str, int] = {}
    for mode, pin in (("adaptive", []), ("fixed", ["--orbench-fixed-concurrency"])):
        with OpenAIServer() as server, judge_server({}) as judge:
            judge.latency_s, judge.in_flight_limit = 0.05, 4
            result = run_orbench(pytester, plugin_args, "--orbench-backoff=0.01",
                                 "--orbench-concurrency=32", *pin, *judge_args(judge, "llm"),
                                 url=server.url, cache=f"{mode}.sqlite3", retries=100)
            rate_limited[mode] = judge.rate_limited
        result.assert_outcomes(passed=80)
    assert rate_limited["adaptive"] * 4 < rate_limited["fixed"]
