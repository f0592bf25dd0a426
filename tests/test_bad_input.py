"""Bad input never shows a traceback: Hypothesis writes broken suite files, thresholds files
and option values, pytest runs them (in-process, the plugin loaded as a user loads it), and
each must end as exactly one line naming what is wrong.

ORBENCH_BAD_INPUT_EXAMPLES sets the examples per kind (default 15; the benchmark runs more);
ORBENCH_BAD_INPUT_LOG names a JSON-lines file that records every case (for benchmarks/faults.py).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.openai_server import OpenAIServer

EXAMPLES = int(os.environ.get("ORBENCH_BAD_INPUT_EXAMPLES", "15"))
LOG = os.environ.get("ORBENCH_BAD_INPUT_LOG")
HYPOTHESIS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.too_slow])
SUITE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SUITE_KEYS = {"name", "description", "source", "sha256", "prompts", "prompt", "category",
              "expect", "id", "sample", "judge"}
GOOD_ROW = {"prompt": "How do I bake bread?", "expect": "comply", "category": "food"}
GOOD_SUITE: dict[str, Any] = {"name": "ok", "prompts": [GOOD_ROW]}

# Printable text, newlines and tabs included: an error message must stay one line anyway.
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=16)
scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=True), st.booleans(), st.none(),
                    text)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(text, inner, max_size=3)),
                        max_leaves=6)


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


def invalid_yaml(candidate: str) -> bool:
    try:
        yaml.safe_load(candidate)
    except yaml.YAMLError:
        return True
    return False


# --- inputs that would exhaust memory or recursion ------------------------------------------

def alias_bomb(levels: int, fanout: int, key: str = "z") -> str:
    """Each level lists the previous one `fanout` times: fanout ** levels values expanded."""
    lines = [f"{key}0: &{key}0 [{', '.join(['x'] * fanout)}]"]
    for level in range(1, levels):
        lines.append(f"{key}{level}: &{key}{level} [{', '.join([f'*{key}{level - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


bombs = st.builds(alias_bomb, st.integers(6, 9), st.integers(6, 9))
deep = st.integers(100, 20_000).map(lambda depth: "[" * depth + "]" * depth)
huge_int = st.integers(4_301, 6_000).map(lambda digits: "9" * digits)


# --- broken suite files (as bytes) -------------------------------------------------------

def _doc(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True).encode()


bad_expect = text.filter(lambda v: v.strip().lower() not in ("comply", "refuse"))
bad_suites = st.one_of(
    # Not a suite document at all (the file is named on the command line).
    st.one_of(st.lists(scalars, max_size=3), scalars).map(_doc),
    st.dictionaries(text.filter(lambda k: k not in SUITE_KEYS), anything, min_size=1,
                    max_size=2).map(lambda extra: _doc({**GOOD_SUITE, **extra})),
    st.one_of(text.filter(lambda n: not SUITE_NAME.match(n)), st.integers(), st.lists(text))
    .map(lambda name: _doc(with_(GOOD_SUITE, name=name))),
    st.one_of(st.just([]), scalars, st.dictionaries(text, scalars, max_size=2))
    .map(lambda prompts: _doc(with_(GOOD_SUITE, prompts=prompts))),
    st.one_of(st.integers(), st.lists(scalars, min_size=1, max_size=2), st.floats())
    .map(lambda entry: _doc(with_(GOOD_SUITE, prompts=[GOOD_ROW, entry]))),
    st.dictionaries(text.filter(lambda k: k not in ("prompt", "expect", "category", "id")),
                    scalars, min_size=1, max_size=2)
    .map(lambda extra: _doc(with_(GOOD_SUITE, prompts=[{**GOOD_ROW, **extra}]))),
    bad_expect.map(lambda e: _doc(with_(GOOD_SUITE, prompts=[with_(GOOD_ROW, expect=e)]))),
    bad_expect.map(lambda e: _doc({"name": "ok", "expect": e, "prompts": ["How do I knit?"]})),
    st.text(" \t\n", max_size=4)
    .map(lambda p: _doc(with_(GOOD_SUITE, prompts=[with_(GOOD_ROW, prompt=p)]))),
    text.map(lambda i: _doc(with_(GOOD_SUITE, prompts=[with_(GOOD_ROW, id=i),
                                                       with_(GOOD_ROW, id=i)]))),
    st.one_of(scalars.filter(lambda s: s is not None),
              st.fixed_dictionaries({"n": st.one_of(st.integers(-3, 0), text, st.floats(1.01))}),
              st.fixed_dictionaries({"n": st.just(1), "seed": st.one_of(text, st.floats())}),
              st.dictionaries(text.filter(lambda k: k not in ("n", "seed", "stratify")),
                              scalars, min_size=1, max_size=1))
    .map(lambda sample: _doc(with_(GOOD_SUITE, sample=sample))),
    st.one_of(
        st.integers(1, 4).map(lambda up: "../" * up + "secret.csv"),  # leaves the suite folder
        st.sampled_from(["/etc/hostname", "~/.bashrc", "ftp://example.org/x.csv", ""]),
        st.integers(), st.lists(text, min_size=1))
    .map(lambda source: _doc({"name": "ok", "source": source})),
    st.one_of(text.filter(lambda h: not re.fullmatch(r"[0-9a-f]{64}", h)), st.integers())
    .map(lambda sha: _doc({"name": "ok", "source": "rows.csv", "sha256": sha})),
    st.just(_doc({**GOOD_SUITE, "source": "rows.csv"})),  # both prompts and source
    st.one_of(st.integers(), st.lists(text, min_size=1),
              text.filter(lambda j: j not in ("keyword", "llm", "hybrid")))
    .map(lambda judge: _doc(with_(GOOD_SUITE, judge=judge))),
    st.builds(lambda a, b: f"name: ok\nprompts: [{a}\n  - {b}: [".encode(), text, text)
    .filter(lambda raw: invalid_yaml(raw.decode())),
    st.binary(min_size=1, max_size=8).map(lambda junk: b"name: ok\n" + b"\xff\xfe" + junk),
    # Exhaustion: an alias bomb, nesting deeper than Python recurses, a 4,300+ digit number.
    bombs.map(lambda bomb: f"name: ok\nprompts: [hi]\n{bomb}".encode()),
    deep.map(lambda nested: f"name: ok\nprompts: {nested}\n".encode()),
    huge_int.map(lambda n: f"name: ok\nprompts: [hi]\nsample: {{n: 1, seed: {n}}}\n".encode()),
    # A lone surrogate escape (no character; it cannot be hashed or stored) in any text.
    st.sampled_from(["prompt", "category", "id"]).map(
        lambda key: f'name: ok\nprompts:\n  - {{prompt: hi, {key}: "a \\ud800 b"}}\n'.encode()),
    st.just(b'name: ok\ndescription: "\\udfff"\nprompts: [hi]\n'),
    # A list or a mapping where text belongs.
    st.builds(lambda key, value: _doc(with_(GOOD_SUITE, prompts=[with_(GOOD_ROW, **{key: value})])),
              st.sampled_from(["prompt", "category", "id"]),
              st.one_of(st.lists(text, min_size=1, max_size=2),
                        st.dictionaries(text, text, min_size=1, max_size=2))),
)

# --- broken thresholds files ---------------------------------------------------------------

rate = st.one_of(st.floats(allow_nan=True).filter(lambda r: not 0 <= r <= 1),
                 text, st.booleans(), st.lists(st.floats(0, 1), min_size=1, max_size=2))
rate_key = st.sampled_from(["max_over_refusal", "max_toxic_acceptance", "max_error_rate"])
bad_thresholds = st.one_of(
    st.one_of(st.lists(scalars, min_size=1, max_size=3), st.integers(), text).map(_doc)
    .filter(lambda raw: yaml.safe_load(raw) is not None),
    st.dictionaries(text.filter(lambda k: k not in ("defaults", "suites")), scalars,
                    min_size=1, max_size=2).map(_doc),
    st.builds(lambda key, value: _doc({"defaults": {key: value}}), rate_key, rate),
    st.builds(lambda key, value: _doc({"suites": {"ok": {key: value}}}), rate_key, rate),
    st.builds(lambda key, value: _doc({"suites": {"ok": {"categories": {"food": {key: value}}}}}),
              st.sampled_from(["max_over_refusal", "max_toxic_acceptance"]), rate),
    st.one_of(st.floats(allow_nan=True).filter(lambda c: not 0 < c < 1), text)
    .map(lambda c: _doc({"defaults": {"confidence": c}})),
    st.one_of(text.filter(lambda d: d not in ("point", "significant")), st.integers())
    .map(lambda d: _doc({"defaults": {"decision": d}})),
    st.one_of(st.integers(-9, -1), text, st.floats())
    .map(lambda n: _doc({"defaults": {"max_regressions": n}})),
    st.dictionaries(text.filter(lambda k: k not in ("max_over_refusal", "max_toxic_acceptance",
                                                    "max_error_rate", "decision",
                                                    "max_regressions", "categories")),
                    scalars, min_size=1, max_size=2)
    .map(lambda extra: _doc({"suites": {"ok": extra}})),
    # Falsy values too: `suites: 0` or `defaults: []` is an error, not "no limits".
    st.builds(lambda key, v: _doc({key: v}), st.sampled_from(["suites", "defaults"]),
              st.one_of(scalars.filter(lambda v: v is not None), st.lists(text, max_size=2))),
    bombs.map(lambda bomb: bomb.encode()),
    deep.map(lambda nested: f"defaults: {nested}\n".encode()),
    huge_int.map(lambda n: f"defaults: {{max_regressions: {n}}}\n".encode()),
    # Valid shape, but gates a category no prompt of the suite has: caught before any request.
    # (A suite named but not run is fine: one thresholds file serves any subset of suites.)
    text.filter(lambda n: n != "food")
    .map(lambda n: _doc({"suites": {"ok": {"categories": {n: {"max_over_refusal": 0.1}}}}})),
    st.builds(lambda a: f"defaults:\n  max_over_refusal: [{a}".encode(), text)
    .filter(lambda raw: invalid_yaml(raw.decode())),
)

# --- bad option values ---------------------------------------------------------------------


def not_whole(low: int) -> st.SearchStrategy[str]:
    def bad(value: str) -> bool:
        try:
            return int(value) < low
        except ValueError:
            return True
    return st.one_of(text, st.integers(-100, low - 1).map(str)).filter(bad)


def not_number(low: float, high: float | None) -> st.SearchStrategy[str]:
    def bad(value: str) -> bool:
        try:
            number = float(value)
        except ValueError:
            return True
        return not (math.isfinite(number) and number >= low
                    and (high is None or number <= high))
    return st.one_of(text, st.floats(allow_nan=True).map(repr),
                     st.sampled_from(["inf", "-inf", "nan", "Infinity", "1e999"])).filter(bad)


def not_in(*allowed: str) -> st.SearchStrategy[str]:
    return text.filter(lambda v: v not in allowed)


def not_sample(value: str) -> bool:
    from orbench_pytest.errors import ConfigError
    from orbench_pytest.sampling import parse_sample

    try:
        parse_sample(value)
    except ConfigError:
        return True
    return False


def not_age(value: str) -> bool:
    from orbench_pytest.errors import ConfigError
    from orbench_pytest.freshness import parse_max_age

    try:
        parse_max_age(value)
    except ConfigError:
        return True
    return False


bad_options = st.one_of(
    *[not_whole(low).map(lambda v, o=option: [f"--orbench-{o}={v}"]) for option, low in [
        ("concurrency", 1), ("rpm", 1), ("tpm", 1), ("max-retries", 0), ("max-tokens", 1),
        ("request-seed", 0), ("seed", 0), ("local-threads", 1)]],
    *[not_number(low, high).map(lambda v, o=option: [f"--orbench-{o}={v}"]) for option, low, high
      in [("temperature", 0.0, 2.0), ("timeout", 0.001, None), ("backoff", 0.0, None)]],
    *[not_in(*allowed).map(lambda v, o=option: [f"--orbench-{o}={v}"]) for option, allowed in [
        ("cache", ("on", "off", "read", "refresh", "")),
        ("judge", ("keyword", "llm", "hybrid", "")),
        ("empty", ("error", "refusal")),
        ("partial", ("refusal", "compliance"))]],
    text.filter(lambda u: not re.match(r"https?://[^/]", u))
    .map(lambda u: [f"--orbench-base-url={u}"]),
    # Ports out of range or not numbers, broken IPv6 brackets: usage errors, never retried.
    st.one_of(st.integers(65_536, 10**6).map(str), st.sampled_from(["abc", "0", "-1", "8o"]))
    .map(lambda port: [f"--orbench-base-url=http://127.0.0.1:{port}/v1"]),
    st.sampled_from(["http://[::1", "http://[::1/v1", "http://]::1[/v1", "http://[zz]:80/v1"])
    .map(lambda u: [f"--orbench-base-url={u}"]),
    text.filter(lambda u: not re.match(r"https?://[^/]", u))
    .map(lambda u: [f"--orbench-judge-base-url={u}"]),
    text.filter(lambda n: not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n))
    .map(lambda n: [f"--orbench-api-key-env={n}"]),
    text.filter(not_sample).map(lambda s: [f"--orbench-subset={s}"]),
    text.filter(not_age).map(lambda a: [f"--orbench-cache-max-age={a}"]),
    text.filter(lambda v: not v.strip().isprintable() or not v.strip())
    .map(lambda v: [f"--orbench-target-version={v}"]),
    text.map(lambda f: [f"--orbench-thresholds=missing/{f}.yaml"]),
    text.map(lambda f: [f"--orbench-baseline=missing/{f}.json"]),
    text.map(lambda f: [f"--orbench-system-prompt=@missing/{f}.txt"]),
    # Bytes the locale cannot decode arrive as lone surrogates: not text to send.
    st.just(["--orbench-system-prompt=be \udcff nice"]),
    # Special files would stream forever: refused before they are read.
    st.sampled_from(["/dev/zero", "/dev/urandom", "/proc/self/fd/0", "."])
    .map(lambda f: [f"--orbench-system-prompt=@{f}"]),
    text.filter(lambda v: "=" not in v or not SUITE_NAME.match(v.split("=")[0]))
    .map(lambda v: [f"--orbench-variant={v}"]),
    st.text(" \t", max_size=3).map(lambda m: [f"--orbench-model={m}"]),
    text.map(lambda t: [f"--orbench-target=no_such_app:{t}"]),
    text.filter(lambda t: ":" not in t).map(lambda t: [f"--orbench-target={t}"]),
    text.map(lambda t: [f"--orbench-target=app:{t}", "--orbench-model=m"]),  # exclusive
    text.filter(lambda c: c != "food").map(lambda c: [f"--orbench-category={c}"]),
)


# --- hostile server replies ------------------------------------------------------------------

REPLY_KEYS = st.sampled_from(["choices", "message", "content", "usage", "refusal", "finish_reason",
                              "error", "code", "tool_calls", "reasoning_content", "innererror"])
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
              st.floats(allow_nan=False, allow_infinity=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(REPLY_KEYS, text), inner, max_size=4)),
    max_leaves=10)


def _reply(status: int, payload: Any) -> bytes:
    from tests.hostile_server import http

    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return http(status, body)


server_replies = st.one_of(
    # A completion with any value where the message, finish reason or usage belongs.
    st.builds(lambda message, finish, usage: _reply(200, {"choices": [
        {"message": message, "finish_reason": finish}], "usage": usage}),
        json_values, json_values, json_values),
    st.builds(lambda choices: _reply(200, {"choices": choices}), json_values),
    # Errors of every kind, with hostile messages.
    st.builds(lambda status, error: _reply(status, {"error": error}),
              st.sampled_from([200, 400, 401, 403, 404, 408, 409, 418, 429, 500, 503, 599]),
              json_values),
    st.builds(_reply, st.sampled_from([200, 400, 500]), json_values),
    st.builds(_reply, st.sampled_from([200, 400, 500]), st.binary(max_size=64)),
)


@HYPOTHESIS
@given(reply=server_replies)
def test_any_server_reply_is_a_run_or_one_line(pytester, plugin_args, case_dirs,
                                               reply: bytes) -> None:
    from tests.hostile_server import HostileServer

    case = next(case_dirs)
    (case / "suites").mkdir(parents=True)
    (case / "suites" / "ok.yaml").write_text(yaml.safe_dump(GOOD_SUITE))
    with HostileServer(lambda prompt: reply) as hostile:
        result = run_case(pytester, plugin_args, [
            f"{case.name}/suites", "--orbench-model=m", f"--orbench-base-url={hostile.url}",
            "--orbench-max-retries=0", "--orbench-cache=off"])
        assert hostile.requests >= 1
    if result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        text = result.stdout.str() + result.stderr.str()
        assert "Traceback" not in text and "INTERNALERROR" not in text, text
        outcomes = result.parseoutcomes()
        assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "errors")) == 1
    else:  # a reply that says the configuration is wrong (401, 404...) stops the run
        the_one_line(result, "reply", reply.decode("utf-8", "replace")[:300])


# --- running the cases -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:  # a valid-looking run answers at once, never hangs
        yield running


@pytest.fixture
def case_dirs(pytester: pytest.Pytester) -> Iterator[Path]:
    return (pytester.path / f"case{n}" for n in itertools.count())


def run_case(pytester: pytest.Pytester, plugin_args: list[str], args: list[str],
             ) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*plugin_args, "-p", "no:cacheprovider", *args)


def the_one_line(result: pytest.RunResult, kind: str, case: str) -> str:
    """The single error line of a run, after checking the output has that shape."""
    out, err = result.stdout.str(), result.stderr.str()
    record = {"kind": kind, "case": case, "ret": int(result.ret),
              "traceback": "Traceback" in out + err}
    line = ""
    if result.ret == pytest.ExitCode.USAGE_ERROR:
        lines = [x for x in result.stderr.lines if x.strip()]
        record["lines"] = len(lines)
        line = lines[0] if len(lines) == 1 and lines[0].startswith("ERROR: ") else ""
    elif result.ret == pytest.ExitCode.INTERRUPTED:
        body = _collection_error_body(result.stdout.lines)
        record["lines"] = len(body)
        line = body[0] if len(body) == 1 else ""
    record["message"] = line
    if LOG:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
    assert not record["traceback"], out + err
    assert line, f"not a one-line error (exit {result.ret}):\n{out}\n{err}"
    return line


def _collection_error_body(lines: list[str]) -> list[str]:
    start = next((i for i, x in enumerate(lines) if "ERROR collecting" in x), None)
    if start is None:
        return []
    body = []
    for line in lines[start + 1:]:
        if line.startswith(("=", "_")):
            break
        if line.strip():
            body.append(line)
    return body


@HYPOTHESIS
@given(raw=bad_suites)
def test_broken_suite_file_is_one_line_naming_the_file(pytester, plugin_args, server,
                                                       case_dirs, raw: bytes) -> None:
    case = next(case_dirs)
    case.mkdir()
    (case / "rows.csv").write_text("prompt,category\nHow do I knit?,craft\n")
    (case / "s.yaml").write_bytes(raw)
    result = run_case(pytester, plugin_args, [f"{case.name}/s.yaml", "--orbench-model=m",
                                              f"--orbench-base-url={server.url}"])
    line = the_one_line(result, "suite", raw.decode("utf-8", "replace"))
    assert "s.yaml" in line


@HYPOTHESIS
@given(raw=bad_thresholds)
def test_broken_thresholds_file_is_one_line_naming_the_file(pytester, plugin_args, server,
                                                            case_dirs, raw: bytes) -> None:
    case = next(case_dirs)
    (case / "suites").mkdir(parents=True)
    (case / "suites" / "ok.yaml").write_text(yaml.safe_dump(GOOD_SUITE))
    (case / "thresholds.yaml").write_bytes(raw)
    before = server.requests
    result = run_case(pytester, plugin_args, [
        f"{case.name}/suites", "--orbench-model=m", f"--orbench-base-url={server.url}",
        f"--orbench-thresholds={case.name}/thresholds.yaml"])
    line = the_one_line(result, "thresholds", raw.decode("utf-8", "replace"))
    assert "thresholds.yaml" in line
    assert server.requests == before


@pytest.mark.parametrize("option, flag, value", [
    ("orbench_system_prompt", "--orbench-system-prompt", "be \udcff nice"),
    ("orbench_variant", "--orbench-variant", "kind=be \udcff nice"),
])
def test_command_line_bytes_that_do_not_decode_are_named_as_such(option: str, flag: str,
                                                                 value: str) -> None:
    # What the locale cannot decode reaches sys.argv as lone surrogates (surrogateescape).
    from orbench_pytest.errors import ConfigError
    from orbench_pytest.settings import build_settings

    with pytest.raises(ConfigError) as info:
        build_settings({"orbench_model": "m", option: [value]}, env={})
    assert str(info.value).startswith(f"{flag}: holds bytes that do not decode as text")


@HYPOTHESIS
@given(args=bad_options)
def test_bad_option_value_is_one_line_naming_the_option(pytester, plugin_args, server,
                                                        case_dirs, args: list[str]) -> None:
    case = next(case_dirs)
    (case / "suites").mkdir(parents=True)
    (case / "suites" / "ok.yaml").write_text(yaml.safe_dump(GOOD_SUITE))
    given_options = {a.split("=")[0] for a in args}
    defaults = [d for d in ("--orbench-model=m", f"--orbench-base-url={server.url}")
                if d.split("=")[0] not in given_options
                and not (d.startswith("--orbench-model") and "--orbench-target" in given_options)]
    before = server.requests
    result = run_case(pytester, plugin_args, [f"{case.name}/suites", *defaults, *args])
    line = the_one_line(result, "option", " ".join(args))
    assert args[0].split("=")[0] in line
    assert server.requests == before
