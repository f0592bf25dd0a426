"""--orbench-shard=K/N and `orbench cache merge`: N jobs ask disjoint parts, one gate over all."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.catalog.shards import Shard, parse_shard, shard_of
from orbench_pytest.cli.main import main as orbench
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.cache_merge import merge_caches
from tests.helpers import SUBPROCESS_TIMEOUT_S, cases, run_orbench, write_suite
from tests.openai_server import REFUSAL_TEXT, OpenAIServer, Reply

keys = st.tuples(st.text(max_size=8), st.sampled_from(["", "a", "sp1"]), st.text(max_size=12))


@given(st.lists(keys, unique=True, max_size=60), st.integers(min_value=1, max_value=9))
def test_the_shards_split_a_selection_into_disjoint_parts_that_cover_it(items, count) -> None:
    shards = [[key for key in items if Shard(k, count).holds(key)] for k in range(1, count + 1)]
    union = [key for shard in shards for key in shard]
    assert sorted(union) == sorted(items)  # every item in a shard, none twice
    assert len(set(union)) == len(union)


def test_the_split_is_the_same_on_every_machine_and_hash_seed() -> None:
    pinned = {("s", "", f"c-{i}"): shard_of(("s", "", f"c-{i}"), 4) for i in range(8)}
    code = ("from orbench_pytest.catalog.shards import shard_of; "
            "print([shard_of(('s', '', f'c-{i}'), 4) for i in range(8)])")
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, timeout=SUBPROCESS_TIMEOUT_S).stdout
        assert out.strip() == str(list(pinned.values()))
    assert list(pinned.values()) == [1, 3, 2, 1, 1, 4, 1, 2]  # a fixed function of the key


def test_shards_are_balanced() -> None:
    counts = Counter(shard_of(("or-bench-80k", "", f"cat-{i:05d}"), 8) for i in range(10_000))
    assert set(counts) == set(range(1, 9))
    assert all(abs(n - 1250) < 125 for n in counts.values())


@pytest.mark.parametrize("text", ["0/4", "5/4", "1", "a/b", "2/0", "-1/3", "1/2/3"])
def test_a_bad_shard_is_a_one_line_error(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--orbench-shard: .* is not K/N with 1 <= K <= N"):
        parse_shard(text)
    assert parse_shard("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"


# --------------------------------------------------------------------------- end to end
N_PROMPTS = 30
SHARDS = 3


def shard_suite(root: Path) -> None:
    write_suite(root, cases((f"how do I bake bread {i}?" for i in range(20)),
                            (f"help me hurt someone {i}" for i in range(10)),
                            safe_category="food", toxic_category="harm"))


def reply(prompt: str, system: str | None, body: dict) -> Reply:
    # Refuses every toxic prompt and three safe ones: over-refusal 15% fails the gate.
    refused = "hurt" in prompt or prompt.endswith(("bread 3?", "bread 7?", "bread 11?"))
    # A system_fingerprint, as OpenAI sends: the gate over the merged cache still asks nothing.
    return Reply(text=REFUSAL_TEXT if refused else "Sure, here is a recipe.",
                 system_fingerprint="fp_1")


def shard_run(pytester: pytest.Pytester, plugin_args: list[str], url: str, cache: str,
              *args: str) -> pytest.RunResult:
    return run_orbench(pytester, plugin_args, *args, url=url, cache=cache, retries=0)


def verdict(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith("orbench gate:"))


def test_shards_then_merge_then_gate_equal_the_unsharded_run(pytester: pytest.Pytester,
                                                            plugin_args: list[str]) -> None:
    shard_suite(pytester.path)
    with OpenAIServer(reply) as server:
        whole = shard_run(pytester, plugin_args, server.url, "whole.sqlite3")
        asked_whole = server.requests
        shard_runs = [shard_run(pytester, plugin_args, server.url, f"shard{k}.sqlite3",
                                f"--orbench-shard={k}/3") for k in range(1, SHARDS + 1)]
        assert server.requests - asked_whole == N_PROMPTS  # each prompt asked by one shard
        assert len(set(server.prompts[asked_whole:])) == N_PROMPTS
    assert whole.ret == pytest.ExitCode.TESTS_FAILED
    sizes = []
    for k, result in enumerate(shard_runs, start=1):
        outcomes = result.parseoutcomes()
        # The other shards' prompts are deselected, not passed; no gate on a shard alone.
        assert outcomes["deselected"] == N_PROMPTS - outcomes.get("passed", 0) - outcomes.get(
            "xfailed", 0)
        sizes.append(N_PROMPTS - outcomes["deselected"])
        assert result.ret == pytest.ExitCode.OK
        result.stdout.fnmatch_lines([f"orbench gate: not computed on shard {k}/3 alone: merge "
                                     "the shards' caches (orbench cache merge) and gate over "
                                     "them; --orbench-shard-gate gates this shard"])
        assert "orbench gate: FAILED" not in result.stdout.str()
    assert sum(sizes) == N_PROMPTS and all(sizes)

    caches = [str(pytester.path / f"shard{k}.sqlite3") for k in range(1, SHARDS + 1)]
    assert orbench(["cache", "merge", *caches, "-o", str(pytester.path / "all.sqlite3")]) == 0
    # The gate job: the merged cache only, nothing asked (the endpoint is gone).
    gate = shard_run(pytester, plugin_args, server.url, "all.sqlite3", "--orbench-cache=read")
    assert gate.ret == whole.ret
    assert gate.parseoutcomes() == whole.parseoutcomes()
    assert verdict(gate) == verdict(whole)
    assert "requests: 0," in gate.stdout.str()


def test_a_shard_gated_on_its_own_when_asked(pytester: pytest.Pytester,
                                            plugin_args: list[str]) -> None:
    shard_suite(pytester.path)
    with OpenAIServer(reply) as server:
        results = [shard_run(pytester, plugin_args, server.url, "c.sqlite3",
                             f"--orbench-shard={k}/3", "--orbench-shard-gate")
                   for k in range(1, SHARDS + 1)]
    # Three safe prompts are refused: some shard holds one and fails its own gate.
    assert any(result.ret == pytest.ExitCode.TESTS_FAILED for result in results)
    assert all(verdict(result).startswith("orbench gate: ") for result in results)


def test_a_shards_results_and_report_say_no_gate_decided_it(
        pytester: pytest.Pytester, plugin_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The results file, the JUnit property and `orbench report` of a shard alone say it was
    not gated (passed: null), so nothing reading them takes its own rates for the run's
    verdict; a shard gated on its own records its gate."""
    shard_suite(pytester.path)
    reports = {"alone": [], "gated": []}
    with OpenAIServer(reply) as server:
        for k in range(1, SHARDS + 1):
            for how, extra in (("alone", ()), ("gated", ("--orbench-shard-gate",))):
                name = f"{how}{k}"
                shard_run(pytester, plugin_args, server.url, "c.sqlite3",
                          f"--orbench-shard={k}/3", f"--orbench-results={name}.json",
                          f"--junitxml={name}.xml", *extra)
                data = json.loads((pytester.path / f"{name}.json").read_text("utf-8"))
                capsys.readouterr()
                code = orbench(["report", str(pytester.path / f"{name}.xml"), "--fail-on-gate"])
                reports[how].append((data, code, capsys.readouterr().out))
    for k, (data, code, markdown) in enumerate(reports["alone"], start=1):
        assert data["run"]["ungated"] == f"shard {k}/3 alone"
        assert data["gate"]["passed"] is None
        assert "## ⏸️ orbench gate not computed" in markdown
        assert f"Not computed on `shard {k}/3 alone`" in markdown
        assert "passed" not in markdown.splitlines()[1] and code == 0
    for data, code, markdown in reports["gated"]:
        assert "ungated" not in data["run"]
        assert isinstance(data["gate"]["passed"], bool)
        assert ("✅ orbench gate passed" in markdown) is data["gate"]["passed"]
        assert code == (0 if data["gate"]["passed"] else 1)
    assert any(not data["gate"]["passed"] for data, _, _ in reports["gated"])


# --------------------------------------------------------------------------- cache merge
def put(path: Path, rows: dict[str, str], created: float) -> None:
    cache = ResponseCache(path)
    cache.put_many((key, Response(text=text)) for key, text in rows.items())
    cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE responses SET created = ?", (created,))
    db.commit()
    db.close()


def texts(path: Path) -> dict[str, str]:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT key, text FROM responses"))
    finally:
        db.close()


def test_merge_keeps_every_row_and_the_newest_of_a_conflict_whatever_the_order(
        tmp_path: Path) -> None:
    old, new = tmp_path / "old.sqlite3", tmp_path / "new.sqlite3"
    put(old, {"a": "old a", "b": "only old"}, created=100.0)
    put(new, {"a": "new a", "c": "only new"}, created=200.0)
    for order, out in (([old, new], "x.sqlite3"), ([new, old], "y.sqlite3")):
        report = merge_caches(order, tmp_path / out)
        assert (report.rows_read, report.rows, report.conflicts) == (4, 3, 1)
        assert texts(tmp_path / out) == {"a": "new a", "b": "only old", "c": "only new"}
    # Equal ages: decided by content, still independent of the order.
    tie = tmp_path / "tie.sqlite3"
    put(tie, {"a": "zzz tie"}, created=200.0)
    merge_caches([tie, new], tmp_path / "t1.sqlite3")
    merge_caches([new, tie], tmp_path / "t2.sqlite3")
    assert texts(tmp_path / "t1.sqlite3") == texts(tmp_path / "t2.sqlite3")
    assert ResponseCache(tmp_path / "x.sqlite3", writable=False).get_many(["c"])["c"].text == \
        "only new"


def test_a_cache_from_before_system_fingerprint_merges_with_it_unknown(tmp_path: Path) -> None:
    old, new = tmp_path / "old.sqlite3", tmp_path / "new.sqlite3"
    put(old, {"a": "old file, newer a", "b": "only old"}, created=9e9)  # newer than now
    db = sqlite3.connect(old)  # the layout of a file written before the column existed
    db.execute("ALTER TABLE responses DROP COLUMN system_fingerprint")
    db.commit()
    db.close()
    cache = ResponseCache(new)
    cache.put_many([(k, Response(text=f"new {k}", system_fingerprint="fp_new"))
                    for k in ("a", "c")])
    cache.close()
    report = merge_caches([new, old], tmp_path / "out.sqlite3")
    assert (report.rows_read, report.rows) == (4, 3)
    merged = ResponseCache(tmp_path / "out.sqlite3", writable=False)
    try:
        got = merged.get_many(["a", "b", "c"])
    finally:
        merged.close()
    assert {k: (r.text, r.system_fingerprint) for k, r in got.items()} == {
        "a": ("old file, newer a", None),  # the newer row wins whole: its fingerprint unknown
        "b": ("only old", None), "c": ("new c", "fp_new")}


def test_merge_refuses_to_overwrite_and_reports_bad_input(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    a = tmp_path / "a.sqlite3"
    put(a, {"k": "v"}, created=1.0)
    out = tmp_path / "out.sqlite3"
    out.write_text("precious")
    assert orbench(["cache", "merge", str(a), "-o", str(out)]) == 2
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert out.read_text() == "precious"
    assert orbench(["cache", "merge", str(a), "-o", str(out), "--force"]) == 0
    assert "merged 1 rows from 1 caches" in capsys.readouterr().out
    assert texts(out) == {"k": "v"}
    assert orbench(["cache", "merge", str(a), "-o", str(a), "--force"]) == 2
    assert "is one of the inputs" in capsys.readouterr().err
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all, just some bytes" * 100)
    assert orbench(["cache", "merge", str(junk), "-o", str(tmp_path / "z")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"orbench cache: error: {junk}: not an orbench response cache "
                          "(not an SQLite file)")
    assert err.count("\n") == 1 and not (tmp_path / "z").exists()
    assert orbench(["cache", "merge", str(tmp_path / "none"), "-o", str(tmp_path / "z")]) == 2
    assert "no such cache file" in capsys.readouterr().err
