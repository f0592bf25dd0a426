"""The SQLite response cache: what it keeps, what the key depends on, several writers, bad files."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.config.settings import build_settings
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.cache import CacheWriteError, ResponseCache, cache_key
from orbench_pytest.run.runner import generation_params, target_identity
from tests.helpers import SUBPROCESS_TIMEOUT_S, answers_stored, run_orbench


def answer(text: str = "Sure, here it is.", **fields: object) -> Response:
    values: dict = {"text": text, "finish_reason": "stop", "latency_ms": 12.5,
                    "usage": {"prompt_tokens": 7, "completion_tokens": 5}, "raw": '{"id": 1}'}
    values.update(fields)
    return Response(**values)


def test_round_trip_keeps_every_field_and_marks_answers_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([("a", answer(refusal="no", reasoning="thinking"))])
    cache.put_many([("b", answer("blocked", finish_reason="content_filter",
                                 content_filter=True))])
    found = cache.get_many(["a", "b", "missing"])
    assert set(found) == {"a", "b"}
    a = found["a"]
    assert (a.text, a.finish_reason, a.latency_ms, a.usage, a.refusal, a.reasoning) == (
        "Sure, here it is.", "stop", 12.5, {"prompt_tokens": 7, "completion_tokens": 5}, "no",
        "thinking")
    assert a.cached and a.attempts == 0
    assert found["b"].content_filter and found["b"].finish_reason == "content_filter"
    # The raw body and the time of the answer are kept too (for audits, not for verdicts).
    raw, created = sqlite3.connect(tmp_path / "c.sqlite3").execute(
        "SELECT raw, created FROM responses WHERE key = 'a'").fetchone()
    assert raw == '{"id": 1}' and created > 1.6e9


def test_transport_errors_are_never_stored(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([("a", Response(text=None, error="HTTP 503 after 7 attempts"))])
    cache.put_many([("b", Response(text=None, error="timed out")), ("c", answer())])
    assert answers_stored(cache) == 1 and set(cache.get_many(["a", "b", "c"])) == {"c"}


def test_a_read_only_cache_reads_but_never_writes(tmp_path: Path) -> None:
    ResponseCache(tmp_path / "c.sqlite3").put_many([("a", answer())])
    reader = ResponseCache(tmp_path / "c.sqlite3", writable=False)
    reader.put_many([("b", answer())])
    reader.put_many([("c", answer())])
    assert answers_stored(reader) == 1 and "a" in reader.get_many(["a"])


def test_lookups_of_many_keys_span_query_chunks(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([(f"k{i}", answer(f"answer {i}")) for i in range(1234)])
    found = cache.get_many(f"k{i}" for i in range(0, 1300))
    assert len(found) == 1234 and found["k1233"].text == "answer 1233"


def test_a_cached_answer_is_the_response_its_fields_make(tmp_path: Path) -> None:
    """Rows are rebuilt without Response's __init__: every field is set, as __init__ sets it."""
    cache = ResponseCache(tmp_path / "c.sqlite3")
    stored = answer("Sure \u00e9t\u00e9.", refusal="r", reasoning="why",
                    system_fingerprint="fp_1", content_filter=True)
    cache.put_many([("a", stored)])
    found = cache.get_many(["a"])["a"]
    assert found == Response(text="Sure \u00e9t\u00e9.", finish_reason="stop", latency_ms=12.5,
                             content_filter=True, refusal="r", reasoning="why",
                             usage={"prompt_tokens": 7, "completion_tokens": 5}, raw=None,
                             cached=True, attempts=0, system_fingerprint="fp_1",
                             created=found.created)
    assert isinstance(found.created, float)


def test_a_lookup_without_usage_reads_the_same_answers_with_no_token_counts(
        tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([(f"k{i}", answer(f"answer {i}")) for i in range(3)])
    full, light = cache.get_many(["k0", "k2"]), cache.get_many(["k0", "k2"], usage=False)
    assert all(r.usage == {"prompt_tokens": 7, "completion_tokens": 5} for r in full.values())
    assert all(r.usage == {} for r in light.values())
    assert {k: r.text for k, r in light.items()} == {k: r.text for k, r in full.items()}


@pytest.mark.parametrize("usage", [True, False])
def test_a_row_of_other_types_is_a_miss_with_or_without_its_usage(tmp_path: Path,
                                                                   usage: bool) -> None:
    path = tmp_path / "c.sqlite3"
    cache = ResponseCache(path)
    cache.put_many([(key, answer()) for key in ("good", "blob usage", "text age", "blob raw")])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET usage = X'00' WHERE key = 'blob usage'")
        db.execute("UPDATE responses SET created = 'yesterday' WHERE key = 'text age'")
        db.execute("UPDATE responses SET raw = X'00' WHERE key = 'blob raw'")  # never read
    found = cache.get_many(["good", "blob usage", "text age", "blob raw"], usage=usage)
    assert set(found) == {"good", "blob raw"} and cache.ignored_rows == 2


def test_lookups_find_every_answer_whatever_order_it_was_stored_in(tmp_path: Path) -> None:
    """Rows are read in the table's order (by rowid), not the keys': an answer stored again
    moves to a new rowid and is found there, with its new text, in every chunk."""
    cache = ResponseCache(tmp_path / "c.sqlite3")
    keys = [f"k{(i * 7919) % 1500:04d}" for i in range(1500)]  # not in key order
    cache.put_many([(key, answer(f"first {key}")) for key in keys])
    cache.put_many([(key, answer(f"again {key}")) for key in keys[::3]])
    found = cache.get_many([*reversed(keys), "missing"])
    assert len(found) == 1500
    assert {key: r.text for key, r in found.items()} == {
        key: f"{'again' if i % 3 == 0 else 'first'} {key}" for i, key in enumerate(keys)}
    # The lookup's read transaction is over: a write goes through.
    cache.put_many([("after", answer())])
    assert answers_stored(cache) == 1501


def test_a_lookup_that_fails_leaves_no_transaction_open(tmp_path: Path) -> None:
    """A row whose text is not UTF-8 (a damaged file) fails the lookup with a one-line error;
    the connection is left as it was, so the run's writes still go through."""
    path = tmp_path / "c.sqlite3"
    cache = ResponseCache(path)
    cache.put_many([(f"k{i}", answer()) for i in range(600)])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET text = CAST(X'61FF62' AS TEXT) WHERE key = 'k550'")
    with pytest.raises(ConfigError, match="unreadable"):
        cache.get_many(f"k{i}" for i in range(600))
    cache.put_many([("after", answer())])
    assert answers_stored(cache) == 601


BASE = {"orbench_model": "m", "orbench_base_url": "http://127.0.0.1:9/v1"}
CHANGES = [
    {"orbench_base_url": "http://127.0.0.1:10/v1"},
    {"orbench_model": "other"},
    {"orbench_temperature": "0.7"},
    {"orbench_max_tokens": "64"},
    {"orbench_request_seed": "3"},
]


def key_for(options: dict, system: str | None = None, prompt: str = "p") -> str:
    settings = build_settings({**BASE, **options}, env={})
    return cache_key(target_identity(settings, generation_params(settings)), system, prompt)


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: next(iter(c)))
def test_the_key_changes_with_every_target_and_generation_setting(change: dict) -> None:
    assert key_for(change) != key_for({})


def test_the_key_ignores_what_does_not_change_the_answer() -> None:
    # Concurrency, retries and the timeout change how we ask, never what comes back.
    assert key_for({"orbench_concurrency": "3", "orbench_max_retries": "0",
                    "orbench_timeout": "5"}) == key_for({})


@given(st.one_of(st.none(), st.text(max_size=20)), st.text(max_size=30),
       st.one_of(st.none(), st.text(max_size=20)), st.text(max_size=30))
def test_the_key_separates_system_prompt_and_prompt(s1, p1, s2, p2) -> None:
    identity = {"kind": "openai", "model": "m"}
    same = cache_key(identity, s1, p1) == cache_key(identity, s2, p2)
    assert same == ((s1, p1) == (s2, p2))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=8)


@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5),
       st.one_of(st.none(), st.text(max_size=20)), st.text(max_size=30))
def test_the_key_is_the_hash_of_the_stored_answers_json(identity, system, prompt) -> None:
    """Caches written by earlier releases keep hitting: the key is still the SHA-256 of the
    compact, key-sorted JSON of target, system prompt and prompt."""
    blob = json.dumps({"target": identity, "system": system, "prompt": prompt},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert cache_key(identity, system, prompt) == hashlib.sha256(blob.encode()).hexdigest()


def _writer(path: str, name: str, rows: int, start: multiprocessing.synchronize.Event) -> None:
    cache = ResponseCache(Path(path))
    start.wait()
    for i in range(rows):  # one commit per answer
        cache.put_many([(f"{name}-{i}", answer(f"{name} {i}"))])
    cache.close()


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    writers = [context.Process(target=_writer, args=(str(path), name, 300, start))
               for name in ("one", "two")]
    for process in writers:
        process.start()
    start.set()
    for process in writers:
        process.join(timeout=SUBPROCESS_TIMEOUT_S)
        assert process.exitcode == 0
    cache = ResponseCache(path)
    assert answers_stored(cache) == 600
    found = cache.get_many([f"{n}-{i}" for n in ("one", "two") for i in range(300)])
    assert found["two-299"].text == "two 299" and len(found) == 600


@pytest.mark.parametrize("content", [b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_corrupt_file_is_a_one_line_error_that_says_to_delete_it(tmp_path: Path,
                                                                   content: bytes) -> None:
    path = tmp_path / "broken.sqlite3"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        ResponseCache(path)
    message = str(info.value)
    assert str(path) in message and "delete it" in message and "\n" not in message


@pytest.mark.parametrize("content", [b"this is not a database" * 100, b"\x00" * 4096])
def test_a_file_not_sqlite_is_not_advised_deleted(tmp_path: Path, content: bytes) -> None:
    """Not an SQLite file at all: the user's own file named by mistake, left as it is."""
    path = tmp_path / "notes.md"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        ResponseCache(path)
    message = str(info.value)
    assert f"{path}: not an orbench response cache (not an SQLite file)" in message
    assert "delete it" not in message and "\n" not in message
    assert path.read_bytes() == content


def test_a_corrupt_cache_stops_pytest_with_a_usage_error(pytester, plugin_args,
                                                         openai_server) -> None:
    pytester.mkdir("suites")
    (pytester.path / "suites" / "s.yaml").write_text(
        "name: s\nprompts:\n  - {prompt: hello, expect: comply}\n")
    (pytester.path / "bad.sqlite3").write_bytes(b"garbage" * 1000)
    result = run_orbench(pytester, plugin_args, url=openai_server.url, cache="bad.sqlite3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *bad.sqlite3: not an orbench response cache (not an SQLite file); it is "
         "left as it is*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert openai_server.requests == 0


def test_a_deleted_cache_leaves_no_trap_for_the_next_run(tmp_path: Path) -> None:
    # The file deleted (as the unreadable-cache message advises) while another program still
    # holds it open: its -wal/-shm stay behind and would fail the next run's new file.
    path = tmp_path / "responses.sqlite3"
    ResponseCache(path).put_many([("k", Response(text="hello"))])
    holder = sqlite3.connect(path)
    holder.execute("UPDATE responses SET created = 1")
    holder.commit()
    path.unlink()
    assert path.with_name(path.name + "-wal").exists()
    script = ("import sys\nfrom pathlib import Path\n"
              "from orbench_pytest.fetch.cache import ResponseCache\n"
              "from orbench_pytest.core.types import Response\n"
              "cache = ResponseCache(Path(sys.argv[1]))\n"
              "assert cache.get_many(['k']) == {}\n"
              "cache.put_many([('k2', Response(text='again'))])\n"
              "print(cache.get_many(['k2'])['k2'].text)\n")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT_S)
    holder.close()
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "again"


def test_a_write_lock_held_past_the_timeout_fails_the_write_naming_the_file(
        tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    ResponseCache(path).put_many([("old", Response(text="kept"))])
    cache = ResponseCache(path, lock_wait_s=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run writing, for longer than we wait
    try:
        assert cache.get_many(["old"])["old"].text == "kept"  # reading needs no lock
        assert ResponseCache(path, writable=False).get_many(["old"])["old"].text == "kept"
        with pytest.raises(CacheWriteError) as caught:
            cache.put_many([("new", Response(text="lost?"))])
        message = str(caught.value)
        assert str(path) in message and "locked" in message and "1 answer(s) not stored" in message
        # Opened for writing while the lock is held: found at once, before any request
        # (deliberately changed: the lock used to be met in the middle of the fetch).
        with pytest.raises(ConfigError, match="locked by another process"):
            ResponseCache(path, lock_wait_s=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


ANY_CODE_POINT = st.text(st.characters(blacklist_categories=()), max_size=40)  # lone surrogates too


@given(text=ANY_CODE_POINT, error=ANY_CODE_POINT)
def test_any_endpoint_text_is_stored_and_read_back_as_utf_8(tmp_path_factory, text: str,
                                                            error: str) -> None:
    """A lone surrogate (JSON can escape one) becomes U+FFFD; any other text is unchanged."""
    response = Response(text=text, raw=text, error=error or None)
    for value in (response.text, response.raw, response.error or ""):
        value.encode("utf-8")  # no lone surrogate is left
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        assert response.text == text
    cache = ResponseCache(tmp_path_factory.mktemp("c") / "c.sqlite3")
    cache.put_many([("k", Response(text=text, raw=text))])
    assert cache.get_many(["k"])["k"].text == response.text


@pytest.mark.parametrize("seed, key", [
    (None, "29600a4b8ffdf1d6b32b299be283bd33817345ed6457991d30dfbe4b1b1bde75"),
    (7, "d4b754bd53c63d9d1e4eb1bb66586f9d158ce0f1b574d2f20f6f84e06a6f336f")])
def test_the_llm_judges_cache_keys_are_those_users_caches_hold(seed, key) -> None:
    """Computed before the judge's identity became model_identity (which keeps an unset seed
    as null): a changed key would ask every cached judge reply again."""
    from orbench_pytest.fetch.targets import GenerationParams, OpenAICompatibleTarget
    from orbench_pytest.judges.channel import judge_identity

    params = GenerationParams(temperature=0.0, max_tokens=200, seed=seed)
    target = OpenAICompatibleTarget("http://127.0.0.1:8000/v1", "judge-m", None, params, 4)
    messages = [{"role": "user", "content": "Is this a refusal?"}]
    assert cache_key(judge_identity(target), None,
                     json.dumps(messages, ensure_ascii=False)) == key
