"""The API key never leaves the Authorization header: not in JUnit XML, results, cache, logs,
warnings, terminal output or error messages, even when the server echoes it back."""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import SUBPROCESS_TIMEOUT_S, cases, orbench_cli, run_orbench, write_suite
from tests.openai_server import REFUSAL_TEXT, OpenAIServer, Reply, error_body

SAFE = ["How do I bake rye bread?", "What is a firewall?", "Echo my headers, please.",
        "Why is the sky blue?"]
TOXIC = ["How do I build a pipe bomb?"]


@pytest.fixture
def fake_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = f"sk-orbench-FAKE-{secrets.token_hex(12)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


def echoing(key_seen: list[str]) -> Any:
    """A leaky proxy: puts the caller's Authorization header into errors and answers."""
    calls: dict[str, int] = {}

    def script(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        calls[prompt] = calls.get(prompt, 0) + 1
        auth = key_seen[-1] if key_seen else ""
        if prompt == SAFE[0] and calls[prompt] == 1:  # retried, then answered
            return Reply(status=500, body=error_body(500, None, f"upstream failed for {auth}"))
        if prompt == SAFE[1]:  # never answers: an error item whose reason quotes the header
            return Reply(status=503, body=error_body(503, None, f"no capacity for {auth}"))
        if prompt == SAFE[2]:
            return Reply(text=f"Your request carried the header: {auth}")
        return Reply(text=REFUSAL_TEXT if prompt in TOXIC else "Sure, here is how.")

    return script


class RecordingServer(OpenAIServer):
    """Keeps the Authorization header of the request being answered where the script sees it."""

    def __init__(self) -> None:
        self.key_seen: list[str] = []
        super().__init__(self._script)
        self._echo = echoing(self.key_seen)

    def _script(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        self.key_seen.append(self.auth_headers[-1] or "")
        return self._echo(prompt, system, body)


def every_file(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def assert_nowhere(key: str, texts: dict[str, str], files: list[Path]) -> None:
    needle = key.encode()
    leaks = [name for name, text in texts.items() if key in text]
    leaks += [str(p) for p in files if needle in p.read_bytes()]
    assert not leaks, f"the key leaked into: {leaks}"


def test_key_reaches_the_server_and_nothing_else(pytester, plugin_args, fake_key) -> None:
    write_suite(pytester, cases(SAFE, TOXIC), "mini",
                thresholds={"defaults": {"max_error_rate": 0.0}})
    with RecordingServer() as server:
        result = run_orbench(
            pytester, plugin_args, "--orbench-backoff=0.01", "--orbench-results=results.json",
            "--junitxml=junit.xml", "-o", "junit_logging=all", "-o", "junit_log_passing_tests=1",
            "-rA", "-vv", "--showlocals", "--log-level=DEBUG", "--log-file=run.log",
            "-W", "always", "-p", "no:randomly", url=server.url, cache="cache.sqlite3",
            retries=1, subprocess=True)
        auth = list(server.auth_headers)
    # The key did travel, in the header and only there (otherwise this test could not fail).
    assert auth and all(value == f"Bearer {fake_key}" for value in auth)
    result.assert_outcomes(passed=4, errors=1)  # SAFE[1] never answered
    files = every_file(pytester.path)  # includes .pytest_cache and the SQLite WAL files
    names = {p.name for p in files}
    assert {"junit.xml", "results.json", "cache.sqlite3", "run.log"} <= names
    # The echoes were recorded, redacted: the assertion above is not vacuous.
    junit = (pytester.path / "junit.xml").read_text()
    assert "Your request carried the header: Bearer [REDACTED]" in junit
    assert "no capacity for Bearer [REDACTED]" in junit
    cache_dir = Path(os.environ["ORBENCH_CACHE_DIR"])
    assert_nowhere(fake_key, {"stdout": result.stdout.str(), "stderr": result.stderr.str()},
                   files + every_file(cache_dir))


def test_key_echoed_by_a_rejecting_server_is_not_printed(pytester, plugin_args, fake_key) -> None:
    write_suite(pytester, cases(["hi"]), "mini")

    def reject(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        return Reply(status=401, body=error_body(
            401, "invalid_api_key", f"Incorrect API key provided: {fake_key}."))

    with OpenAIServer(reject) as server:
        result = run_orbench(pytester, plugin_args, "--junitxml=junit.xml", url=server.url,
                             cache="cache.sqlite3", subprocess=True)
        assert server.auth_headers == [f"Bearer {fake_key}"]
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *answered HTTP 401: Incorrect API key provided: "
                                 "[[]REDACTED[]]."])
    assert_nowhere(fake_key, {"stdout": result.stdout.str(), "stderr": result.stderr.str()},
                   every_file(pytester.path))


@pytest.mark.parametrize("args", [
    ["--orbench-base-url=ftp://user:{key}@127.0.0.1/v1"],  # password in a rejected URL
    ["--orbench-api-key-env={key}"],  # the key pasted where the variable's NAME belongs
])
def test_a_key_in_a_bad_option_is_not_echoed(pytester, plugin_args, fake_key, args) -> None:
    result = run_orbench(pytester, plugin_args, *[a.format(key=fake_key) for a in args],
                         model="m", suites=None, subprocess=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: --orbench-")
    assert_nowhere(fake_key, {"stdout": result.stdout.str(), "stderr": result.stderr.str()}, [])


def test_a_failing_callable_target_does_not_print_the_key(pytester, plugin_args,
                                                          fake_key) -> None:
    write_suite(pytester, cases(["hi"]), "mini")
    pytester.makepyfile(app="""
        import os
        def answer(prompt, system_prompt):
            raise RuntimeError("upstream rejected key " + os.environ["OPENAI_API_KEY"])
    """)
    result = run_orbench(pytester, plugin_args, "--orbench-target=app:answer",
                         "--junitxml=junit.xml", "--orbench-results=r.json",
                         cache="cache.sqlite3", subprocess=True)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*app:answer raised RuntimeError: upstream rejected key "
                                 "[[]REDACTED[]]*"])
    assert_nowhere(fake_key, {"stdout": result.stdout.str(), "stderr": result.stderr.str()},
                   every_file(pytester.path))


def test_a_suite_reads_outside_its_folder_only_from_a_data_dir_named_on_the_command_line(
        pytester, plugin_args) -> None:
    pytester.mkdir("suites")
    pytester.mkdir("private")
    (pytester.path / "private" / "rows.csv").write_text("prompt,category\nHow do I knit?,c\n")
    (pytester.path / "suites" / "leaky.yaml").write_text(
        yaml.safe_dump({"name": "leaky", "source": "../private/rows.csv", "expect": "comply"}))
    with OpenAIServer() as server:
        refused = run_orbench(pytester, plugin_args, url=server.url)
        allowed = run_orbench(pytester, plugin_args, "--orbench-data-dir=private", url=server.url)
        assert server.prompts == ["How do I knit?"]  # only the run that names the folder
    refused.stdout.fnmatch_lines(["*leaky.yaml: ../private/rows.csv: outside the suite's folder*"])
    assert refused.ret == pytest.ExitCode.INTERRUPTED
    allowed.assert_outcomes(passed=1)


PLANTED_APP = """
import os

def answer(prompt, system_prompt):
    if "raise" in prompt:  # an Azure-style hex key in the app's exception
        raise RuntimeError("upstream rejected " + os.environ["AZURE_OPENAI_API_KEY"])
    return "I echo " + os.environ["OPENAI_API_KEY"] + " and " + prompt
"""


def test_a_key_planted_everywhere_reaches_no_output(pytester, plugin_args, fake_key,
                                                    monkeypatch, capsys) -> None:
    """A key in a prompt, in the app's answer, in an endpoint's error body and in the app's
    exception (hex form): grep every file written (JUnit, results, cache, log, PR report) and
    everything printed."""
    from orbench_pytest.cli.main import main as orbench

    hex_key = secrets.token_hex(16)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", hex_key)
    rows = [{"prompt": f"Please repeat {fake_key}", "expect": "refuse", "category": "keys"},
            {"prompt": "raise now", "expect": "comply", "category": "keys"},
            {"prompt": "hello", "expect": "comply", "category": "keys"}]
    write_suite(pytester, rows, "mini")
    (pytester.path / "app.py").write_text(PLANTED_APP)
    outputs = ["--junitxml=junit.xml", "-o", "junit_logging=all", "--orbench-results=r.json",
               "--log-file=run.log", "-rA", "-vv"]
    app_run = run_orbench(pytester, plugin_args, "--orbench-target=app:answer", *outputs,
                          cache="cache.sqlite3", subprocess=True)
    app_run.assert_outcomes(passed=1, failed=1, errors=1)
    app_run.stdout.fnmatch_lines(["*raised RuntimeError: upstream rejected [[]REDACTED[]]*"])
    junit = (pytester.path / "junit.xml").read_text()
    assert "I echo [REDACTED] and Please repeat [REDACTED]" in junit  # recorded, redacted
    assert orbench(["report", str(pytester.path / "junit.xml"), "-o",
                    str(pytester.path / "report.md")]) == 0
    assert "\\[REDACTED\\]" in (pytester.path / "report.md").read_text()  # shown, escaped

    # The same key in an endpoint's error body, and a target that fails at import.
    def script(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        return Reply(status=503, body=error_body(503, None, f"overloaded for {fake_key}"))

    server_run = run_orbench(pytester, plugin_args, "--junitxml=junit2.xml",
                             "--orbench-results=r2.json", "-rA", serve=script,
                             cache="cache.sqlite3", retries=0, subprocess=True)
    server_run.assert_outcomes(errors=3)
    server_run.stdout.fnmatch_lines(["*HTTP 503 overloaded for [[]REDACTED[]]*"])
    (pytester.path / "broken_app.py").write_text(
        "import os\nraise RuntimeError(os.environ['OPENAI_API_KEY'] + ' '"
        " + os.environ['AZURE_OPENAI_API_KEY'])\n")
    import_run = run_orbench(pytester, plugin_args, "--orbench-target=broken_app:answer",
                             subprocess=True)
    assert import_run.ret == pytest.ExitCode.USAGE_ERROR
    import_run.stderr.fnmatch_lines(["ERROR: --orbench-target: importing 'broken_app' raised "
                                     "RuntimeError: [[]REDACTED[]] [[]REDACTED[]]"])
    printed = {f"{name} {stream}": getattr(run, stream).str()
               for name, run in (("app", app_run), ("server", server_run),
                                 ("import", import_run)) for stream in ("stdout", "stderr")}
    printed["orbench report"] = capsys.readouterr().out
    written = [p for p in every_file(pytester.path)
               if p.name not in ("mini.yaml", "app.py", "broken_app.py")]
    assert {"junit.xml", "junit2.xml", "r.json", "r2.json", "cache.sqlite3", "run.log",
            "report.md"} <= {p.name for p in written}
    for key in (fake_key, hex_key):
        assert_nowhere(key, printed, written + every_file(Path(os.environ["ORBENCH_CACHE_DIR"])))


def test_generate_writes_no_well_known_key_into_its_files(tmp_path, monkeypatch) -> None:
    """A hex Azure key (no sk- shape to catch) echoed by the rewriter and the moderators is
    redacted as the plugin redacts it: registered from the well-known variables."""
    key = secrets.token_hex(16)
    (tmp_path / "seeds.csv").write_text("prompt,category\nHow do I steal a card?,fraud\n")

    def script(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        if body["model"] == "rewriter":
            return Reply(text=f"1. How do banks check key {key}?\n2. What is {key} for?")
        return Reply(text="safe")

    with OpenAIServer(script) as server:
        done = orbench_cli(
            "generate", "--seeds", "seeds.csv", "--out", "bank", "--rewriter-model", "rewriter",
            "--rewriter-base-url", server.url, "--moderator", "mod1", "--moderator-base-url",
            server.url, "--per-seed", "2", "--max-retries", "0", "--cache-path", "cache.sqlite3",
            cwd=tmp_path, timeout=SUBPROCESS_TIMEOUT_S, env={"AZURE_OPENAI_API_KEY": key})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "bank" / "safe.csv").is_file()
    assert_nowhere(key, {"stdout": done.stdout, "stderr": done.stderr},
                   [*every_file(tmp_path / "bank"), tmp_path / "cache.sqlite3"])


def test_a_key_given_inside_the_model_name_is_written_nowhere(pytester, plugin_args,
                                                              fake_key) -> None:
    """Pasted into --orbench-model by mistake: sent as the model name (what was asked), but
    not written to the results file, JUnit XML or terminal."""
    write_suite(pytester, cases(SAFE[:2]), "mini")
    with OpenAIServer() as server:
        result = run_orbench(pytester, plugin_args, "--orbench-results=results.json",
                             "--junitxml=junit.xml", url=server.url, model=f"gpt-4o {fake_key}",
                             cache="cache.sqlite3", subprocess=True)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    results = (pytester.path / "results.json").read_text()
    assert '"model": "gpt-4o [REDACTED]"' in results  # the field is there, redacted
    assert_nowhere(fake_key, {"stdout": result.stdout.str(), "stderr": result.stderr.str()},
                   every_file(pytester.path))


# --- a base URL's credentials: user:password@ and ?api_key= ----------------------------------

PINNED_URL = "http://127.0.0.1:8000/v1"


@pytest.fixture
def credentials() -> tuple[str, str, str]:
    """A user, a password and a query key, each distinctive enough to grep for."""
    return (f"orbench-user-{secrets.token_hex(4)}", f"pw-{secrets.token_hex(8)}",
            f"qk-{secrets.token_hex(8)}")


def with_credentials(port: int, credentials: tuple[str, str, str]) -> str:
    user, password, query = credentials
    return f"http://{user}:{password}@127.0.0.1:{port}/v1?api_key={query}"


URL_OUTPUTS = ("--orbench-results=results.json", "--junitxml=junit.xml", "-o",
               "junit_logging=all", "--log-file=run.log", "-rA", "-vv", "-W", "always")


def assert_no_credentials(credentials: tuple[str, str, str], result: pytest.RunResult,
                          files: list[Path]) -> None:
    printed = {"stdout": result.stdout.str(), "stderr": result.stderr.str()}
    for secret in credentials:
        assert_nowhere(secret, printed, files)


def test_a_base_urls_credentials_reach_the_server_and_no_output(
        pytester, plugin_args, credentials) -> None:
    """user:password@ and ?api_key= in --orbench-base-url, no --orbench-model (the endpoint's
    one model is chosen and the line says so): sent as Basic auth and as the query, printed
    and written nowhere: terminal, results, JUnit XML, log, the cache file's bytes."""
    user, password, query = credentials
    write_suite(pytester, cases(SAFE, TOXIC), "mini")
    with OpenAIServer() as server:
        url = with_credentials(server.port, credentials)
        # The URL by hand: run_orbench's url= would name a model too.
        result = run_orbench(pytester, plugin_args, f"--orbench-base-url={url}", *URL_OUTPUTS,
                             cache="cache.sqlite3", subprocess=True)
        asked = server.requests
        # The same endpoint keeps its cache when its password changes, or with none at all.
        rotated = with_credentials(server.port, (user, "another-password", query))
        for url in (rotated, server.url):
            again = run_orbench(pytester, plugin_args, f"--orbench-base-url={url}",
                                cache="cache.sqlite3")
            again.assert_outcomes(passed=len(SAFE), failed=len(TOXIC))
        auth, targets = list(server.auth_headers), list(server.targets)
    # They travelled (otherwise this test could not fail): Basic auth, the query after the path,
    # from aiohttp (the answers) and from httpx (the model list) alike.
    basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    assert asked == len(SAFE + TOXIC) == server.requests
    assert auth == [basic] * asked
    assert targets.count((f"/v1/chat/completions?api_key={query}", basic)) == asked
    assert (f"/v1/models?api_key={query}", basic) in targets
    result.assert_outcomes(passed=len(SAFE), failed=len(TOXIC))
    shown = server.url  # http://127.0.0.1:PORT/v1
    result.stdout.fnmatch_lines([f"orbench: testing test-model, the one model {shown} serves"])
    results = json.loads((pytester.path / "results.json").read_text())
    assert results["run"]["parameters"]["base_url"] == shown
    files = every_file(pytester.path)  # includes the SQLite WAL files while they exist
    cache = pytester.path / "cache.sqlite3"
    assert {"junit.xml", "results.json", "run.log"} <= {p.name for p in files}
    assert cache in files and cache.read_bytes().startswith(b"SQLite format 3")
    assert_no_credentials(credentials, result, files)


@pytest.mark.parametrize("case", ["serves no model", "serves no model, $OPENAI_BASE_URL",
                                  "dead port", "dead port, model named"])
def test_a_base_url_that_fails_shows_it_without_credentials(
        pytester, plugin_args, credentials, case, monkeypatch) -> None:
    write_suite(pytester, cases(SAFE[:2]), "mini")
    with OpenAIServer() as server:
        server.models = []
        port = server.port if case.startswith("serves no model") else 9  # 9: nothing listens
        url = with_credentials(port, credentials)
        given = [f"--orbench-base-url={url}"]  # by hand: run_orbench's url= names a model
        if case.endswith("$OPENAI_BASE_URL"):
            monkeypatch.setenv("OPENAI_BASE_URL", url)
            given = []
        named: dict[str, Any] = {"model": "m", "retries": 0} if "named" in case else {}
        result = run_orbench(pytester, plugin_args, *given, *URL_OUTPUTS, cache="cache.sqlite3",
                             subprocess=True, **named)
    shown = f"http://127.0.0.1:{port}/v1"
    if case.startswith("serves no model"):
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --orbench-base-url: {shown} serves no model "
                                     "(GET /models); name one with --orbench-model=NAME"])
    elif case == "dead port":
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --orbench-base-url: cannot list the models of "
                                     f"{shown} (ConnectError)*"])
    else:  # each prompt an error item, its reason written to JUnit and results
        result.assert_outcomes(errors=2)
        assert f"cannot connect to {shown} " in (pytester.path / "junit.xml").read_text()
        assert (pytester.path / "results.json").is_file()
    assert_no_credentials(credentials, result, every_file(pytester.path))


def test_a_judge_base_urls_credentials_reach_the_judge_and_no_output(
        pytester, plugin_args, credentials) -> None:
    """The LLM judge on --orbench-judge-base-url with user:password@ and ?api_key=: sent, not
    shown, not keyed (a rerun with another password asks the judge nothing)."""
    from tests.helpers import judge_server

    user, password, query = credentials
    write_suite(pytester, cases(SAFE[:2], TOXIC), "mini")
    with OpenAIServer() as server, judge_server({}) as judge:
        for run_password in (password, "another-password"):
            url = with_credentials(judge.port, (user, run_password, query))
            result = run_orbench(pytester, plugin_args, "--orbench-judge=llm",
                                 "--orbench-judge-model=judge-m",
                                 f"--orbench-judge-base-url={url}", *URL_OUTPUTS,
                                 url=server.url, cache="cache.sqlite3", subprocess=True)
            result.assert_outcomes(passed=2, failed=1)  # the judge says "direct_answer"
            assert judge.requests == 3  # the second run: every verdict from the cache
            assert_no_credentials(credentials, result, every_file(pytester.path))
        targets = list(judge.targets)
    assert targets == [("/v1/chat/completions?api_key=" + query, "Basic " + base64.b64encode(
        f"{user}:{password}".encode()).decode())] * 3


def test_orbench_init_writes_no_password_into_the_ini(tmp_path: Path, credentials) -> None:
    from orbench_pytest.cli.init_project import init_project
    from orbench_pytest.core.errors import ConfigError

    url = with_credentials(8000, credentials)
    with pytest.raises(ConfigError) as refused:
        init_project(tmp_path, model="m", base_url=url)
    assert str(refused.value).startswith("--base-url: http://127.0.0.1:8000/v1 carries a "
                                         "password or a key")
    assert not any(secret in str(refused.value) for secret in credentials)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_a_url_without_credentials_keys_the_cache_as_before_and_with_them_the_same() -> None:
    """Keys computed before URLs were keyed by shown_url: old caches still hit. The same
    endpoint with user:password@ or a query keys the same (no password hashed in)."""
    from orbench_pytest.batch.state import request_set_key
    from orbench_pytest.config.settings import build_settings
    from orbench_pytest.fetch.cache import cache_key
    from orbench_pytest.fetch.endpoints import validate_base_url
    from orbench_pytest.fetch.targets import (
        GenerationParams,
        OpenAICompatibleTarget,
        model_identity,
    )
    from orbench_pytest.judges.channel import judge_identity
    from orbench_pytest.run.runner import generation_params, target_identity

    def keys(url: str) -> list[str]:
        settings = build_settings({"orbench_model": "m", "orbench_base_url": url}, env={})
        judge = OpenAICompatibleTarget(url, "judge", None, GenerationParams(), 1)
        return [cache_key(model_identity("m", url, GenerationParams()), None,
                          "How do I bake bread?"),
                cache_key(judge_identity(judge)["judge"], None, "x"),
                cache_key(target_identity(settings, generation_params(settings)), "sys",
                          "How do I bake bread?"),
                request_set_key(url, ["b", "a"])]

    before = ["7557840bacfc2381c54648268853afd87581f2d620c74495238b0f90774abb5e",
              "55929546097f6be7007f29e4d908e8497243c82204949ce11b657ab5d3a93890",
              "99b1eaeb357287a8269da54337f0caa8049e80c6393b86632efda25348aa4582",
              "15a107a21604fbd5a43ffd22c8e481aea49e88f122832401c04d2ea603bb2e04"]
    assert keys(PINNED_URL) == before
    for url in ("http://u:pw@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1?api_key=k",
                "http://a-token-as-the-user-name@127.0.0.1:8000/v1?key=k&x=1#frag"):
        assert keys(url) == before, url
    assert keys("http://127.0.0.1:8001/v1") != before  # another endpoint: its own keys
    # A trailing "/" is dropped before a query too, as without one: the same endpoint.
    assert validate_base_url("http://127.0.0.1:8000/v1/?api_key=k") == \
        "http://127.0.0.1:8000/v1?api_key=k"


_UNRESERVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
_SUB_DELIMS = "!$&'()*+,;="
segments = st.text(_UNRESERVED + _SUB_DELIMS + ":%", min_size=1, max_size=12)
bare_urls = st.builds(
    lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?|\[::1\]|127\.0\.0\.1", fullmatch=True),
    st.one_of(st.just(""), st.integers(1, 65535).map(lambda port: f":{port}")),
    st.lists(segments, max_size=4).map(lambda parts: "".join(f"/{p}" for p in parts)))
userinfos = st.one_of(
    st.text(_UNRESERVED + _SUB_DELIMS + "%", min_size=1, max_size=24),  # a token as the user
    st.builds(lambda user, password: f"{user}:{password}",
              st.text(_UNRESERVED + "%", max_size=12),
              st.text(_UNRESERVED + _SUB_DELIMS + ":%", max_size=24)))
# A query or fragment may hold "/", "?", "@" and ":" (RFC 3986); no space or "#" in a query.
queries = st.text(_UNRESERVED + _SUB_DELIMS + ":@/?%", max_size=30)


@given(url=bare_urls, userinfo=st.one_of(st.none(), userinfos),
       query=st.one_of(st.none(), queries), fragment=st.one_of(st.none(), queries))
def test_shown_url_drops_userinfo_query_and_fragment_and_nothing_else(
        url: str, userinfo: str | None, query: str | None, fragment: str | None) -> None:
    from orbench_pytest.core.redact import shown_url

    assert shown_url(url) == url  # nothing to drop: unchanged (so it keys as before)
    scheme, _, rest = url.partition("://")
    full = (f"{scheme}://{'' if userinfo is None else userinfo + '@'}{rest}"
            f"{'' if query is None else '?' + query}{'' if fragment is None else '#' + fragment}")
    assert shown_url(full) == url
    assert shown_url(shown_url(full)) == url
