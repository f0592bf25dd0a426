"""A cached answer is reused only for the candidate that gave it: rerun after changing the
app's code, its version, the provider's backend, or after the max age, and it is asked again.

pytest runs in real subprocesses; the model answers over real HTTP (tests/openai_server.py).
"""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orbench_pytest.reports.results import load_run
from tests.helpers import questions, run_orbench, write_suite
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, OpenAIServer, Reply
from tests.stale_app import APP, HELPFUL, REFUSING

N = 6
DAY = 86400


class Model:
    """The server's behaviour, switchable between runs: answers, or refuses everything."""

    def __init__(self) -> None:
        self.refuse = False
        self.fingerprint: str | None = None
        self.rotate: list[str] = []  # backends served in turn, one request each
        self._calls = 0

    def __call__(self, prompt: str, system: str | None, body: object) -> Reply:
        refuse = self.refuse or bool(system and "Refuse" in system)
        fingerprint = self.fingerprint
        if self.rotate:
            fingerprint = self.rotate[self._calls % len(self.rotate)]
        self._calls += 1
        return Reply(text=REFUSAL_TEXT if refuse else ANSWER_TEXT,
                     system_fingerprint=fingerprint)


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
def server(model: Model):
    with OpenAIServer(model) as running:
        yield running


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    write_suite(pytester, questions(N))
    return pytester.path


# What every run here writes. Runs in a subprocess as CI runs them (and so the app's modules
# are read afresh); in this process (cheaper) for the variations of an option already shown
# end to end.
OUTPUTS = ("-p", "no:cacheprovider", "--orbench-results=r.json", "--junitxml=j.xml")


def results(project: Path) -> dict:
    return json.loads((project / "r.json").read_text())


def junit_cached(project: Path) -> list[str]:
    tree = ET.parse(project / "j.xml")
    return [prop.get("value") for case in tree.iter("testcase")
            for prop in case.iter("property") if prop.get("name") == "cached"]


def age_cache(project: Path, days: float) -> None:
    """Make every cached answer `days` older (the clock is the `created` column)."""
    with sqlite3.connect(project / "c.sqlite3") as db:
        db.execute("UPDATE responses SET created = created - ?", (days * DAY,))


def passed_all(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=N)
    result.stdout.fnmatch_lines(["orbench gate: PASSED"])


def failed_over_refusal(result: pytest.RunResult) -> None:
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes().get("failed", 0) > 0
    result.stdout.fnmatch_lines(["orbench gate: FAILED*over-refusal*"])


# --- the app's code (tests/stale_app.py) ------------------------------------------------------
def test_a_change_to_the_apps_code_is_asked_again(pytester, plugin_args, project, server,
                                                  monkeypatch) -> None:
    monkeypatch.setenv("APP_MODEL_URL", server.url)
    (project / "app.py").write_text(APP)
    (project / "helpers.py").write_text(HELPFUL)
    target = "--orbench-target=app:answer"

    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, target, cache="c.sqlite3",
                           subprocess=True))
    assert server.requests == N
    first = results(project)["run"]["target_fingerprint"]
    assert first["code_files"] == ["app.py", "helpers.py"] and len(first["code"]) == 64

    again = run_orbench(pytester, plugin_args, *OUTPUTS, target, cache="c.sqlite3", subprocess=True)
    passed_all(again)
    assert server.requests == N  # the same code: every answer from the cache
    again.stdout.fnmatch_lines([f"answers: {N} ({N} from cache), requests: 0,*",
                                f"cache: {N} answers from the cache, the oldest *s old "
                                "(max age 30d)"])
    assert junit_cached(project) == ["true"] * N
    assert [item.cached for item in load_run(project / "j.xml").items] == [True] * N

    # The app now tells its model to refuse: an edit in a module it imports, not in app.py.
    (project / "helpers.py").write_text(REFUSING)
    changed = run_orbench(pytester, plugin_args, *OUTPUTS, target, cache="c.sqlite3",
                          subprocess=True)
    failed_over_refusal(changed)
    assert server.requests == 2 * N
    changed.stdout.fnmatch_lines([f"answers: {N} (0 from cache), requests: {N},*"])
    data = results(project)
    assert data["run"]["target_fingerprint"]["code"] != first["code"]
    assert {item["verdict"] for item in data["items"]} == {"refusal"}
    assert all(item["cached"] is False and item["cache_age_s"] is None for item in data["items"])
    assert junit_cached(project) == ["false"] * N


# --- a version the user gives ------------------------------------------------------------------
def test_a_new_target_version_is_asked_again(pytester, plugin_args, project, server,
                                             model) -> None:
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-target-version=v1",
                           url=server.url, cache="c.sqlite3", subprocess=True))
    assert server.requests == N
    assert results(project)["run"]["target_fingerprint"]["version"] == "v1"

    model.refuse = True  # redeployed under the same name and URL
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-target-version=v1",
                           url=server.url, cache="c.sqlite3", subprocess=True))
    assert server.requests == N  # same version: the cache answers, as told

    changed = run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-target-version=v2",
                          url=server.url, cache="c.sqlite3", subprocess=True)
    failed_over_refusal(changed)
    assert server.requests == 2 * N
    assert results(project)["run"]["target_fingerprint"]["version"] == "v2"


def test_the_version_from_the_ini_file_and_the_command_line_winning(
        pytester, plugin_args, project, server, model) -> None:
    pytester.makeini("[pytest]\norbench_target_version = v1\n")
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3"))
    assert server.requests == N
    assert results(project)["run"]["target_fingerprint"]["version"] == "v1"

    model.refuse = True
    pytester.makeini("[pytest]\norbench_target_version = v2\n")
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-target-version=v1",
                           url=server.url, cache="c.sqlite3"))
    assert server.requests == N  # the command line's v1 wins over the ini's v2: cached

    failed_over_refusal(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url,
                                    cache="c.sqlite3"))  # the ini's v2
    assert server.requests == 2 * N


def test_a_bad_version_is_a_usage_error(pytester, plugin_args, project, server) -> None:
    result = run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-target-version= ",
                         url=server.url, cache="c.sqlite3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --orbench-target-version: expects one printable line*"])
    assert server.requests == 0


# --- the max age -------------------------------------------------------------------------------
def test_answers_older_than_the_max_age_are_asked_again(pytester, plugin_args, project, server,
                                                        model) -> None:
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3",
                           subprocess=True))
    assert server.requests == N

    model.refuse = True
    age_cache(project, 3)
    kept = run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-cache-max-age=7d",
                       url=server.url, cache="c.sqlite3", subprocess=True)
    passed_all(kept)
    assert server.requests == N
    kept.stdout.fnmatch_lines([f"cache: {N} answers from the cache, the oldest 3d old "
                               "(max age 7d)"])
    ages = [item["cache_age_s"] for item in results(project)["items"]]
    assert all(3 * DAY <= age < 3 * DAY + 600 for age in ages)

    age_cache(project, 37)  # now 40 days old: past the default 30 days
    expired = run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3",
                          subprocess=True)
    failed_over_refusal(expired)
    assert server.requests == 2 * N
    expired.stdout.fnmatch_lines([f"cache: {N} older than the max age asked again"])


def test_no_limit_reuses_and_zero_never_reuses(pytester, plugin_args, project, server,
                                               model) -> None:
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3"))
    age_cache(project, 400)
    model.refuse = True
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-cache-max-age=none",
                           url=server.url, cache="c.sqlite3"))
    assert server.requests == N
    failed_over_refusal(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-cache-max-age=0",
                                    url=server.url, cache="c.sqlite3"))
    assert server.requests == 2 * N
    failed_over_refusal(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-cache-max-age=0",
                                    url=server.url, cache="c.sqlite3"))
    assert server.requests == 3 * N  # 0: asked every time


def test_xdist_workers_report_the_controllers_fresh_answers(pytester, plugin_args, project,
                                                            server, model) -> None:
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3"))
    age_cache(project, 40)
    model.refuse = True
    result = run_orbench(pytester, plugin_args, *OUTPUTS, "-n", "2", url=server.url,
                         cache="c.sqlite3")
    failed_over_refusal(result)
    assert result.parseoutcomes()["failed"] == N
    assert server.requests == 2 * N


def test_a_bad_max_age_is_a_usage_error(pytester, plugin_args, project, server) -> None:
    result = run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-cache-max-age=7",
                         url=server.url, cache="c.sqlite3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --orbench-cache-max-age: '7' is not an age*"])


# --- the provider's system_fingerprint ---------------------------------------------------------
def test_a_changed_system_fingerprint_is_asked_again(pytester, plugin_args, project, server,
                                                     model) -> None:
    model.fingerprint = "fp_a"
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3",
                           subprocess=True))
    assert server.requests == N

    same = run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3",
                       subprocess=True)
    passed_all(same)
    assert server.requests == N + 1  # one cached prompt asked again, to compare
    same.stdout.fnmatch_lines([f"answers: {N} ({N - 1} from cache), requests: 1,*"])
    assert sorted(junit_cached(project)) == ["false"] + ["true"] * (N - 1)

    model.fingerprint = "fp_b"  # the provider changed its backend
    model.refuse = True
    changed = run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3",
                          subprocess=True)
    failed_over_refusal(changed)
    assert server.requests == 2 * N + 1
    changed.stdout.fnmatch_lines([f"answers: {N} (0 from cache), requests: {N},*",
                                  f"cache: {N - 1} asked again: the system_fingerprint changed"])
    data = results(project)
    assert data["run"]["target_fingerprint"]["system_fingerprints"] == ["fp_b"]
    assert {item["verdict"] for item in data["items"]} == {"refusal"}


def test_a_fingerprint_already_seen_is_not_a_change(pytester, plugin_args, project, server,
                                                    model) -> None:
    """Providers serve several backends at once: answers carrying fp_a and fp_b, a probe
    that meets either, nothing else is asked."""
    model.rotate = ["fp_a", "fp_b"]
    passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, "--orbench-concurrency=1",
                           url=server.url, cache="c.sqlite3"))
    assert server.requests == N
    assert results(project)["run"]["target_fingerprint"]["system_fingerprints"] == [
        "fp_a", "fp_b"]
    for _ in range(2):  # the probe meets fp_a, then fp_b: both known
        asked = server.requests
        passed_all(run_orbench(pytester, plugin_args, *OUTPUTS, url=server.url, cache="c.sqlite3"))
        assert server.requests == asked + 1
