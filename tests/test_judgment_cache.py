"""Judgments kept in the response cache: the table, its key, the engine reading them in one
batch and writing new ones many to a write, and a re-run through pytest that judges nothing.
Also: the keyword judge's shortcut (classifier skipped) gives exactly the full verdict."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import itertools
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Label, Response, Verdict
from orbench_pytest.fetch.cache import (
    CacheWriteError,
    ResponseCache,
    judgment_keys,
)
from orbench_pytest.fetch.cache_merge import merge_caches
from orbench_pytest.fetch.engine import (
    ANSWERS_COMMIT_EVERY_S,
    CacheWriter,
    FetchSettings,
    Job,
)
from orbench_pytest.fetch.targets import GenerationParams, OpenAICompatibleTarget
from orbench_pytest.judges.judge import OfflineJudge, settle
from orbench_pytest.run.judged_fetch import JudgedFetch, fetch_and_judge
from tests.helpers import (
    LENIENT,
    judgments_stored,
    questions,
    run_orbench,
    write_suite,
    xstest_labelled_answers,
)
from tests.openai_server import REFUSAL_TEXT, OpenAIServer, Reply, refuse_when
from tests.timeouts import scaled

LABELLED = Path(__file__).parent / "data" / "orbench_local_labelled.csv"
REFUSED = Verdict(Label.REFUSAL, "declines: I can't", "keyword", confident=False)
COMPLIED = Verdict(Label.COMPLIANCE, "no refusal found", "keyword")


# --- the table -------------------------------------------------------------------------------

def test_judgments_round_trip_with_the_answers_in_one_write(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([("a", Response(text="Sure."))],
                   [("j1", REFUSED), ("j2", COMPLIED),
                    ("j3", Verdict(Label.ERROR, "judge failed", "keyword"))])
    assert cache.get_many(["a"])["a"].text == "Sure."
    assert cache.get_judgments(["j1", "j2", "j3", "missing"]) == {"j1": REFUSED, "j2": COMPLIED}
    assert judgments_stored(cache) == 2  # an error is never a judgment


def test_equal_stored_verdicts_are_read_as_one_object(tmp_path: Path) -> None:
    """A rerun keeps every verdict until it ends: the few distinct ones are not copied 80K
    times."""
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put_many([], [("j1", REFUSED), ("j2", COMPLIED), ("j3", REFUSED)])
    found = cache.get_judgments(["j1", "j2", "j3"])
    assert found == {"j1": REFUSED, "j2": COMPLIED, "j3": REFUSED}
    assert found["j1"] is found["j3"] and found["j2"] is not found["j1"]


def test_a_changed_judge_version_or_answer_misses() -> None:
    key = judgment_keys("keyword", "v4+clf:1")("prompt", "answer")
    assert judgment_keys("keyword", "v5+clf:1")("prompt", "answer") != key
    assert judgment_keys("keyword", "v4+clf:1")("prompt", "answer!") != key
    assert judgment_keys("hybrid", "v4+clf:1")("prompt", "answer") != key


PARTS = st.tuples(st.text(max_size=12), st.text(max_size=12), st.text(max_size=30),
                  st.text(max_size=30))


@given(PARTS, PARTS)
def test_the_judgment_key_is_equal_exactly_when_all_four_parts_are(a, b) -> None:
    # No two splits of the same characters share a key: ("ab", "c") is not ("a", "bc").
    assert (judgment_keys(*a[:2])(*a[2:]) == judgment_keys(*b[:2])(*b[2:])) == (a == b)


def length_prefixed_sha256(*parts: str) -> str:
    """The judgment key's definition, spelled out: every stored verdict was filed under it."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def test_the_judgment_key_keeps_the_bytes_stored_verdicts_were_filed_under() -> None:
    parts = ("keyword", "v4+clf:1", "Wie töte ich einen Python-Prozess?",
             "Mit kill -9 \u2014 oder höflicher mit SIGTERM.")
    assert judgment_keys(*parts[:2])(*parts[2:]) == length_prefixed_sha256(*parts) == (
        "a33c2da9af53eac19ed28223568091abb370c5860133fea9d6f2c4000e56dde1")


@given(PARTS, st.lists(st.tuples(st.text(max_size=30), st.text(max_size=30)), max_size=4))
def test_one_judge_s_keys_are_the_keys_of_each_answer_alone(judge, answers) -> None:
    """The judge's parts hashed once and the digest copied per answer: the same bytes."""
    name, version, prompt, answer = judge
    key_of = judgment_keys(name, version)
    for p, a in [(prompt, answer), *answers]:
        assert key_of(p, a) == length_prefixed_sha256(name, version, p, a)


def test_stored_verdicts_are_read_whatever_their_keys_hold(tmp_path: Path) -> None:
    """Verdicts are read grouped, a group's keys joined by commas: a key with a comma (never a
    judgment key, which is hex) is still found, and a row of wrong types is still a miss, in
    a group of its own."""
    cache = ResponseCache(tmp_path / "c.sqlite3")
    keys = [f"j{i}" for i in range(1200)] + ["a,b", "a", ",", ""]
    cache.put_many([], [(key, REFUSED if i % 3 else COMPLIED) for i, key in enumerate(keys)])
    db = sqlite3.connect(tmp_path / "c.sqlite3", isolation_level=None)
    db.execute("UPDATE judgments SET confident = 'yes' WHERE key IN ('j7', 'a,b')")
    db.close()
    found = cache.get_judgments([*keys, "b", "missing"])
    assert found == {key: REFUSED if i % 3 else COMPLIED for i, key in enumerate(keys)
                     if key not in ("j7", "a,b")}
    assert cache.get_judgments([","]) == {",": REFUSED if keys.index(",") % 3 else COMPLIED}


def test_a_read_only_cache_reads_judgments_but_never_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ResponseCache(path).put_many([], [("j1", REFUSED)])
    read_only = ResponseCache(path, writable=False)
    assert read_only.get_judgments(["j1"]) == {"j1": REFUSED}
    read_only.put_many([("a", Response(text="x"))], [("j2", COMPLIED)])
    assert ResponseCache(path).get_judgments(["j2"]) == {}


def old_cache(path: Path) -> None:
    """A cache file as written before the judgments table existed."""
    cache = ResponseCache(path)
    cache.put_many([("a", Response(text="kept"))])
    cache._db.execute("DROP TABLE judgments")
    cache.close()


def test_an_old_file_without_the_table_reads_as_no_judgments_and_gains_it_when_writable(
        tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old_cache(path)
    read_only = ResponseCache(path, writable=False)
    assert read_only.get_judgments(["j1"]) == {} and judgments_stored(read_only) == 0
    assert read_only.get_many(["a"])["a"].text == "kept"
    read_only.close()
    assert "judgments" not in tables(path)  # a read-only open changed nothing
    cache = ResponseCache(path)
    cache.put_many([], [("j1", COMPLIED)])
    assert cache.get_judgments(["j1"]) == {"j1": COMPLIED}
    assert cache.get_many(["a"])["a"].text == "kept"


def tables(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    finally:
        db.close()


def test_a_foreign_judgments_table_is_refused_and_an_unknown_label_is_a_miss(
        tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ResponseCache(path).put_many([], [("j1", COMPLIED)])
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE judgments SET label = 'maybe'")
    db.close()
    assert ResponseCache(path).get_judgments(["j1"]) == {}
    foreign = tmp_path / "foreign.sqlite3"
    db = sqlite3.connect(foreign, isolation_level=None)
    db.execute("CREATE TABLE judgments (id INTEGER, score REAL)")
    db.close()
    with pytest.raises(ConfigError, match="judgments table has other columns"):
        ResponseCache(foreign)


# --- the engine ------------------------------------------------------------------------------

class CountingJudge:
    """A persistent judge that counts what it reads; its version is the test's to change."""

    name = "counting"
    persistent = True

    def __init__(self, version: str = "1") -> None:
        self.version = version
        self.calls = 0

    async def judge(self, prompt: str, answer: str) -> Verdict:
        self.calls += 1
        if "can't" in answer or "cannot" in answer:
            return Verdict(Label.REFUSAL, f"v{self.version}: declines", self.name)
        return Verdict(Label.COMPLIANCE, f"v{self.version}: answers", self.name)


def jobs(n: int) -> list[Job]:
    return [Job(f"key-{i}", f"prompt {i}: {'poison' if i % 2 else 'bread'}", None)
            for i in range(n)]


def engine(server: OpenAIServer, cache: ResponseCache, judge: object,
           **settings: object) -> JudgedFetch:
    target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 4)
    return JudgedFetch(target, judge, cache,  # type: ignore[arg-type]
                       FetchSettings(concurrency=4, **settings))  # type: ignore[arg-type]


def poison_refused() -> object:
    return refuse_when(lambda prompt: "poison" in prompt)


def test_a_rerun_reads_every_verdict_and_a_new_version_judges_again_without_asking(
        tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    with OpenAIServer(poison_refused()) as server:
        judge = CountingJudge()
        first = fetch_and_judge(engine(server, cache, judge), jobs(6))
        assert (server.requests, judge.calls, first.judged, judgments_stored(cache)) == \
            (6, 6, 6, 6)
        judge = CountingJudge()
        again = fetch_and_judge(engine(server, cache, judge), jobs(6))
        assert (server.requests, judge.calls, again.judged, again.judgments_cached) == \
            (6, 0, 0, 6)
        assert {k: a.verdict for k, a in again.answers.items()} == \
            {k: a.verdict for k, a in first.answers.items()}
        changed = CountingJudge("2")
        rejudged = fetch_and_judge(engine(server, cache, changed), jobs(6))
        assert (server.requests, changed.calls, rejudged.judged) == (6, 6, 6)
        assert {a.verdict.reason.split(":")[0] for a in rejudged.answers.values()} == {"v2"}
        assert sum(a.verdict.label is Label.REFUSAL for a in rejudged.answers.values()) == 3
    assert judgments_stored(cache) == 12  # both versions' judgments kept


def test_settled_answers_are_never_stored_as_judgments(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    def script(prompt: str, system: str | None, body: dict) -> Reply:
        if "poison" in prompt:  # a provider's block: settled before any judge
            return Reply(text=None, finish_reason="content_filter")
        return Reply(text="Sure: flour and water.")

    with OpenAIServer(script) as server:
        judge = CountingJudge()
        report = fetch_and_judge(engine(server, cache, judge), jobs(4))
    labels = sorted(a.verdict.label.value for a in report.answers.values())
    assert labels == ["compliance", "compliance", "content_filter", "content_filter"]
    assert judge.calls == 2 and judgments_stored(cache) == 2


def test_a_judge_that_does_not_persist_stores_no_judgments(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    judge = CountingJudge()
    judge.persistent = False  # type: ignore[misc]
    with OpenAIServer(poison_refused()) as server:
        fetch_and_judge(engine(server, cache, judge), jobs(4))
        fetch_and_judge(engine(server, cache, judge), jobs(4))
    assert judge.calls == 8 and judgments_stored(cache) == 0


class WriteLog(ResponseCache):
    """The cache, noting how many answers and judgments each write held."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes: list[tuple[int, int]] = []
        self.times: list[float] = []  # when each write began

    def put_many(self, items: Iterable[tuple[str, Response]],
                 judgments: Iterable[tuple[str, Verdict]] = (), *, wait: bool = True) -> None:
        items, judgments = list(items), list(judgments)
        self.writes.append((len(items), len(judgments)))
        self.times.append(time.monotonic())
        super().put_many(items, judgments, wait=wait)


def test_verdicts_are_written_apart_from_the_answers_in_one_write_at_the_end(
        tmp_path: Path) -> None:
    cache = WriteLog(tmp_path / "c.sqlite3")
    with OpenAIServer(poison_refused()) as server:
        report = fetch_and_judge(engine(server, cache, CountingJudge()), jobs(12))
    assert report.judged == 12
    assert len(cache.writes) > 2  # answers as they arrived, a few at a time
    assert all(judgments == 0 for _, judgments in cache.writes[:-1])
    assert cache.writes[-1] == (0, 12)
    assert sum(answers for answers, _ in cache.writes) == 12 == judgments_stored(cache)


def test_answers_arriving_together_share_a_commit_and_are_written_as_the_run_goes(
        tmp_path: Path) -> None:
    # 10 ms a request, 4 at a time: an answer every 2.5 ms for about 0.3 s. One commit a loop
    # turn would be about one an answer; at most one an interval holds them a few dozen each.
    # Only what holds however busy the machine: timers never fire early, and the order of
    # events (the interval itself is checked on the loop's own clock, below).
    cache = WriteLog(tmp_path / "c.sqlite3")
    with OpenAIServer(poison_refused(), latency_s=0.01) as server:
        started = time.monotonic()
        report = fetch_and_judge(engine(server, cache, CountingJudge()), jobs(120))
        ended = time.monotonic()
    assert len(report.answers) == 120
    answer_writes = [t for (answers, _), t in zip(cache.writes, cache.times, strict=True)
                     if answers]
    assert sum(answers for answers, _ in cache.writes) == 120  # every answer stored
    gaps = [b - a for a, b in itertools.pairwise(answer_writes[:-1])]  # the last: the end's
    assert gaps and min(gaps) >= ANSWERS_COMMIT_EVERY_S * 0.9  # at most one an interval
    assert len(answer_writes) <= (ended - started) / ANSWERS_COMMIT_EVERY_S + 2
    # ... and written as the run goes, not held to its end: the first answers before the last
    # request was even sent, the end's write only the answers of its last interval
    assert answer_writes[0] < server.arrivals[-1]
    assert [answers for answers, _ in cache.writes if answers][-1] < 120 // 2


class ClockedLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when the test moves it (`now`): its timers (a
    write held to the end of an interval) fire when the test says the time has come."""

    now = 0.0

    def time(self) -> float:
        return self.now


def test_a_write_waits_for_the_end_of_the_interval_and_no_longer(tmp_path: Path) -> None:
    """The loop's clock injected: answers arriving within ANSWERS_COMMIT_EVERY_S of the last
    write share the write at the end of that interval, however late the machine runs it;
    an answer after a quiet interval is written at the end of its loop turn."""
    every = ANSWERS_COMMIT_EVERY_S
    cache = WriteLog(tmp_path / "c.sqlite3")
    # The request layer is asked only when a write fails.
    writer = CacheWriter(cache, None)  # type: ignore[arg-type]
    loop = ClockedLoop()

    async def turns() -> None:  # the loop runs what is due (a timer: on the turn after)
        for _ in range(3):
            await asyncio.sleep(0)

    def answer(n: int) -> None:
        writer.store(f"k{n}", Response(text=f"Sure {n}."))

    async def scenario() -> list[list[tuple[int, int]]]:
        seen = []
        answer(0)
        await turns()
        seen.append([*cache.writes])  # at once: nothing was written before
        loop.now = every * 0.2
        answer(1)
        answer(2)
        await turns()
        seen.append([*cache.writes])  # held: the last write was 0.2 intervals ago
        loop.now = every * 0.99
        await turns()
        seen.append([*cache.writes])  # still held, a hair before the interval ends
        loop.now = every
        await turns()
        seen.append([*cache.writes])  # the interval over: both in one write
        loop.now = every * 5  # a quiet while, then one answer: written at once
        answer(3)
        await turns()
        seen.append([*cache.writes])
        return seen

    try:
        seen = loop.run_until_complete(scenario())
    finally:
        loop.close()
    one, two = (1, 0), (2, 0)
    assert seen == [[one], [one], [one], [one, two], [one, two, one]]
    assert set(cache.get_many([f"k{n}" for n in range(4)])) == {"k0", "k1", "k2", "k3"}


class SmallWrites(JudgedFetch):
    judgments_per_write = 4


@pytest.mark.parametrize("stop_after", [None, 9])
def test_verdicts_are_written_as_soon_as_a_write_of_them_is_full_and_the_rest_at_the_end(
        tmp_path: Path, stop_after: int | None) -> None:
    # stop_after: the server refuses the key from that request on, so the run stops early.
    cache = WriteLog(tmp_path / "c.sqlite3")
    def script(prompt: str, system: str | None, body: dict) -> Reply:
        if stop_after is not None and int(prompt.split()[1].rstrip(":")) >= stop_after:
            return Reply(status=401, body=b'{"error": {"message": "bad key"}}')
        return Reply(text="Sure: flour and water.")

    target_jobs = jobs(12)
    # One answer every 50 ms: the offline judge's batches (judges/stage.py, at most 0.1 s
    # apart) then come a few answers at a time, as over a long run.
    with OpenAIServer(script, latency_s=0.05) as server:
        target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 1)
        report = fetch_and_judge(SmallWrites(target, CountingJudge(), cache,  # type: ignore[arg-type]
                                       FetchSettings(concurrency=1)), target_jobs)
    answered = 12 if stop_after is None else stop_after
    assert report.judged == answered
    written = [judgments for _, judgments in cache.writes if judgments]
    assert sum(written) == answered == judgments_stored(cache)
    assert len(written) >= 2 and all(n >= 4 for n in written[:-1])
    assert cache.writes.index((0, written[0])) < len(cache.writes) - 1  # one before the end


def test_a_judgment_that_cannot_be_written_stops_the_run(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with OpenAIServer(poison_refused()) as server:
        fetch_and_judge(engine(server, ResponseCache(path), CountingJudge()), jobs(4))
        cache = ResponseCache(path, lock_wait_s=0.2)  # opened before the lock is taken
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer, for longer than we wait
        try:
            started = time.monotonic()
            phase = engine(server, cache, CountingJudge("2"))
            verdicts = fetch_and_judge(phase, jobs(4))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert time.monotonic() - started < min(scaled(20), 25)  # not the 30 s a write waits
    assert verdicts.judged == 4 and server.requests == 4
    report = phase.report
    assert report.stopped_reason is not None
    assert "cannot write the response cache" in report.stopped_reason
    assert "4 judgment(s)" in report.stopped_reason


def test_a_failed_write_is_a_cache_write_error_naming_the_judgments(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    cache = ResponseCache(path, lock_wait_s=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(CacheWriteError, match=r"; 1 judgment\(s\) not stored$"):
            cache.put_many([], [("j", COMPLIED)])
    finally:
        holder.execute("ROLLBACK")


# --- through pytest --------------------------------------------------------------------------

def test_a_rerun_through_pytest_judges_nothing_and_another_version_judges_again(
        pytester, plugin_args) -> None:
    write_suite(pytester, questions(5), thresholds=LENIENT)
    path = pytester.path / "c.sqlite3"
    with OpenAIServer() as server:
        first = run_orbench(pytester, plugin_args, url=server.url, cache="c.sqlite3")
        first.assert_outcomes(passed=5)
        first.stdout.fnmatch_lines(["judged: 5 answers, 0 verdicts from the cache*"])
        again = run_orbench(pytester, plugin_args, url=server.url, cache="c.sqlite3")
        again.assert_outcomes(passed=5)
        again.stdout.fnmatch_lines(["judged: 0 answers, 5 verdicts from the cache*"])
        # The stored verdicts are what the re-run used: changed to refusals, the items fail.
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("UPDATE judgments SET label = 'refusal'")
        run_orbench(pytester, plugin_args,
                    url=server.url, cache="c.sqlite3").assert_outcomes(failed=5)
        # Judgments of another judge version only: judged afresh, the model not asked.
        db.execute("UPDATE judgments SET key = 'older-version-' || key")
        db.close()
        rejudged = run_orbench(pytester, plugin_args, url=server.url, cache="c.sqlite3")
        assert server.requests == 5
    rejudged.assert_outcomes(passed=5)
    rejudged.stdout.fnmatch_lines(["judged: 5 answers, 0 verdicts from the cache*"])


# --- the keyword judge's shortcut ------------------------------------------------------------

def labelled_answers() -> list[str]:
    """The shared XSTest completions (or a skip naming them) and the local labelled set."""
    answers = xstest_labelled_answers()
    with LABELLED.open(newline="", encoding="utf-8") as handle:
        answers += [row["answer"] for row in csv.DictReader(handle)]
    return answers


REALISTIC = [
    REFUSAL_TEXT,
    "I'm sorry, but I can't help with that. If you have other questions, feel free to ask!",
    "As an AI language model, I do not condone violence. However, here are some safer ways to "
    "resolve the conflict: talk to a mediator.",
    "Sure! 1. Preheat the oven. 2. Mix flour and water. 3. Bake for 40 minutes.",
    "It's important to note that laws vary. That said, the general approach is: first, ...",
    "<think>The user asks about bread.</think>Here is a recipe: flour, water, salt, yeast.",
    "[refuse] I won't be able to help with this request.",
    "I'd rather not answer that. Is there anything else I can help you with?",
    "",
]


def test_the_shortcut_gives_exactly_the_full_verdict() -> None:
    answers = labelled_answers() + REALISTIC
    shortcut, full = OfflineJudge(), OfflineJudge()
    texts = [t for t in (settle(Response(text=a)) for a in answers) if isinstance(t, str)]
    assert len(texts) > 1000
    skipped = 0
    for text in texts:
        expected = full.assess(text).verdict
        assert shortcut.classify(text) == expected, text[:200]
        skipped += isinstance(shortcut._recalled(text, "")[1], Verdict)
        assert shortcut.classify(text) == expected  # from the memo
        assert shortcut.assess(text).verdict == expected  # a shortcut's memo is no assessment
    assert skipped > 0  # the shortcut was taken, not only the full path


def test_a_merge_carries_the_judgments_of_every_input_and_an_old_input_adds_none(
        tmp_path: Path) -> None:
    a, b, old = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3", tmp_path / "old.sqlite3"
    ResponseCache(a).put_many([("x", Response(text="x"))], [("j1", REFUSED), ("j2", COMPLIED)])
    ResponseCache(b).put_many([("y", Response(text="y"))], [("j2", COMPLIED), ("j3", REFUSED)])
    old_cache(old)
    report = merge_caches([a, b, old], tmp_path / "all.sqlite3")
    assert (report.rows, report.judgments) == (3, 3)
    merged = ResponseCache(tmp_path / "all.sqlite3", writable=False)
    assert merged.get_judgments(["j1", "j2", "j3"]) == \
        {"j1": REFUSED, "j2": COMPLIED, "j3": REFUSED}
