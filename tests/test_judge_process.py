"""The keyword judge in a process beside the run: the same verdicts as judging in the run, and
every answer still judged when the child fails in any way (would not start, is another judge,
dies mid-run, replies garbage, fails on one answer). Real child processes throughout."""

from __future__ import annotations

import asyncio
import csv
import gc
import logging
import os
import re
import signal
import sys
from pathlib import Path

import pytest
import yaml

from orbench_pytest.cache import ResponseCache, judgment_key
from orbench_pytest.fetcher import FetchEngine, FetchReport, FetchSettings, Job, run_phase
from orbench_pytest.judge_process import (
    MIN_ANSWERS,
    PIPE_BYTES,
    BesideJudge,
    JudgeProcess,
    JudgeProcessFailed,
    cores_for_this_run,
)
from orbench_pytest.judges import KeywordJudge, settle
from orbench_pytest.summary import judged_line
from orbench_pytest.targets import GenerationParams, OpenAICompatibleTarget
from orbench_pytest.types import Response, Verdict
from tests.openai_server import OpenAIServer, Reply

LABELLED = Path(__file__).parent / "data" / "orbench_local_labelled.csv"
VERSION = KeywordJudge().version

needs_two_cores = pytest.mark.skipif(cores_for_this_run() < 2,
                                     reason="the judge process needs a second core")


def labelled_answers() -> list[str]:
    with LABELLED.open(encoding="utf-8", newline="") as f:
        return [row["answer"] for row in csv.DictReader(f)]


# --- the engine with a judge process ---------------------------------------------------------

def run(server: OpenAIServer, cache: ResponseCache, jobs: list[Job],
        process_min: int | None) -> FetchReport:
    target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 8)
    engine = FetchEngine(target, KeywordJudge(), cache,
                         FetchSettings(concurrency=8, judge_process_min=process_min))
    return run_phase(engine, jobs)


@needs_two_cores
def test_a_run_judged_beside_gives_and_stores_the_verdicts_judging_in_the_run_gives(
        tmp_path: Path) -> None:
    answers = labelled_answers()  # 300 answers read by people: every shape the rules know
    by_prompt = {f"prompt {i}": answer for i, answer in enumerate(answers)}
    jobs = [Job(f"key-{i}", prompt, None) for i, prompt in enumerate(by_prompt)]
    with OpenAIServer(lambda prompt, system, body: Reply(text=by_prompt[prompt])) as server:
        beside = run(server, ResponseCache(tmp_path / "beside.sqlite3"), jobs, process_min=1)
        here = run(server, ResponseCache(tmp_path / "here.sqlite3"), jobs, process_min=None)
    assert beside.judge_process_cpu_s > 0 and beside.judge_process_failure is None
    assert here.judge_process_cpu_s == 0
    assert beside.judged == here.judged == len(jobs)
    assert {k: a.verdict for k, a in beside.answers.items()} == \
        {k: a.verdict for k, a in here.answers.items()}
    judge = KeywordJudge()
    keys = {judgment_key(judge.name, judge.version, job.prompt,
                         settle(Response(text=by_prompt[job.prompt]))): job.key for job in jobs}
    stored = ResponseCache(tmp_path / "beside.sqlite3").get_judgments(keys)
    assert {keys[k]: v for k, v in stored.items()} == \
        {k: a.verdict for k, a in here.answers.items()}
    line = judged_line(beside)
    assert line is not None and "in a judge process beside the run" in line


@needs_two_cores
def test_cached_answers_a_changed_judge_has_not_judged_go_to_the_judge_process(
        tmp_path: Path) -> None:
    """After a judge upgrade every cached answer is judged again, as many as a first run's:
    they go to the judge process too, with the same verdicts, stored, and nothing is asked."""
    answers = labelled_answers()
    jobs = [Job(f"key-{i}", f"prompt {i}", None) for i in range(len(answers))]
    responses = [(job.key, Response(text=answer)) for job, answer in zip(jobs, answers,
                                                                        strict=True)]
    here_cache, beside_cache = (ResponseCache(tmp_path / f"{name}.sqlite3")
                                for name in ("here", "beside"))
    for cache in (here_cache, beside_cache):
        cache.put_many(responses)  # answers, and no verdict of this judge
    with OpenAIServer() as server:
        here = run(server, here_cache, jobs, process_min=None)
        beside = run(server, beside_cache, jobs, process_min=1)
        again = run(server, ResponseCache(tmp_path / "beside.sqlite3"), jobs, process_min=1)
        assert server.requests == 0
    assert beside.cache_hits == here.cache_hits == len(jobs)
    assert beside.judge_process_cpu_s > 0 and beside.judge_process_failure is None
    assert here.judge_process_cpu_s == 0
    assert beside.judged == here.judged == len(jobs)
    assert {k: a.verdict for k, a in beside.answers.items()} == \
        {k: a.verdict for k, a in here.answers.items()}
    assert again.judgments_cached == len(jobs) and again.judged == 0  # they were stored
    assert again.judge_process_cpu_s == 0  # and nothing was left to judge: no process


@needs_two_cores
def test_a_small_run_or_another_judge_is_judged_in_the_run(tmp_path: Path) -> None:
    jobs = [Job(f"key-{i}", f"prompt {i}", None) for i in range(5)]
    with OpenAIServer() as server:
        small = run(server, ResponseCache(tmp_path / "c.sqlite3"), jobs, process_min=6)
    assert small.judged == 5 and small.judge_process_cpu_s == 0
    line = judged_line(small)
    assert line is not None and "judge process" not in line


# --- the queue and a failing child -------------------------------------------------------------

def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


SERVES_ONE_BATCH = python(
    "import io, sys\n"
    "from orbench_pytest.judge_process import _serve\n"
    "_serve(io.BytesIO(sys.stdin.buffer.readline()), sys.stdout.buffer)\n")
ANOTHER_JUDGE = python("import sys; print('\"keyword-0\"', flush=True); sys.stdin.read()")
EXITS = python("import sys; sys.stderr.write('Traceback: a crash nobody should see\\n')")
GARBAGE = python(f"import json, sys; print(json.dumps({VERSION!r}), flush=True); "
                 "sys.stdin.readline(); print('{not json', flush=True); sys.stdin.read()")
# Replies one verdict fewer than it was sent answers.
SHORT = python(
    "import json, sys\n"
    "from orbench_pytest.judges import KeywordJudge\n"
    "print(json.dumps(KeywordJudge().version), flush=True)\n"
    "for line in sys.stdin:\n"
    "    answers = json.loads(line)[1:]\n"
    "    out = [['compliance', 'answers', True] for _ in answers]\n"
    "    print(json.dumps({'cpu': 0.001, 'verdicts': out}), flush=True)\n")
# Replies null for the second answer of each batch, as the child does when judging raises.
ONE_FAILS = python(
    "import json, sys\n"
    "from orbench_pytest.judges import KeywordJudge\n"
    "judge = KeywordJudge()\n"
    "print(json.dumps(judge.version), flush=True)\n"
    "for line in sys.stdin:\n"
    "    out = []\n"
    "    for i, answer in enumerate(json.loads(line)):\n"
    "        v = judge.classify(answer)\n"
    "        out.append(None if i == 1 else [v.label.value, v.reason, v.confident])\n"
    "    print(json.dumps({'cpu': 0.001, 'verdicts': out}), flush=True)\n")


def judge_all(answers: list[str], command: tuple[str, ...] | None = None
              ) -> tuple[dict[int, Verdict], dict[int, Verdict], BesideJudge[int]]:
    """Every answer through a BesideJudge over `command` (the real child by default), all
    queued in one turn: (verdicts from the child, verdicts judged here, the queue)."""
    judge = KeywordJudge()
    from_child: dict[int, Verdict] = {}
    here: dict[int, Verdict] = {}

    def take(judged: list[tuple[int, str, Verdict]]) -> None:
        for item, answer, verdict in judged:
            assert answer == answers[item] and item not in from_child and item not in here
            from_child[item] = verdict

    async def judge_here(item: int) -> None:
        assert item not in from_child and item not in here
        here[item] = judge.classify(answers[item])

    async def main() -> BesideJudge[int]:
        process = (await JudgeProcess.start(VERSION) if command is None
                   else await JudgeProcess.start(VERSION, command))
        beside = BesideJudge(process, take, judge_here)
        for item in range(len(answers)):
            beside.add(item, answers[item])
        await beside.finish()
        await beside.aclose()
        return beside

    beside = asyncio.run(main())
    assert sorted(from_child.keys() | here.keys()) == list(range(len(answers)))
    expected = {i: judge.classify(a) for i, a in enumerate(answers)}
    assert {**from_child, **here} == expected
    return from_child, here, beside


def test_the_child_judges_the_front_of_the_queue_and_the_run_the_back() -> None:
    answers = labelled_answers() * 3
    from_child, here, beside = judge_all(answers)
    assert from_child and beside.failure is None and beside.cpu_s > 0
    assert min(from_child) == 0  # the child took the front, in order
    assert not here or max(here) == len(answers) - 1  # the run took from the back


@pytest.mark.parametrize(("command", "failure"), [
    (EXITS, "the judge process has ended"),
    (ANOTHER_JUDGE, "runs judge 'keyword-0'"),
    (GARBAGE, "replied JSONDecodeError"),
    (SHORT, r"replied \d+ verdicts to \d+ answers"),  # one fewer: the batch's size varies
])
def test_a_child_that_fails_leaves_every_answer_judged_here(
        command: tuple[str, ...], failure: str, capfd: pytest.CaptureFixture[str]) -> None:
    from_child, here, beside = judge_all(labelled_answers(), command)
    assert not from_child and len(here) == 300
    assert beside.failure is not None and re.search(failure, beside.failure)
    assert "Traceback" not in capfd.readouterr().err  # the child's stderr never shows


def test_a_child_that_dies_mid_run_leaves_the_rest_judged_here() -> None:
    from_child, here, beside = judge_all(labelled_answers() * 2, SERVES_ONE_BATCH)
    assert from_child and here  # the first batch from the child, the rest here
    assert beside.failure == "the judge process has ended"


def test_an_answer_the_child_could_not_judge_is_judged_here() -> None:
    from_child, here, beside = judge_all(labelled_answers(), ONE_FAILS)
    assert beside.failure is None
    assert len(here) >= 2  # the second answer of each batch
    assert 1 in here and 0 in from_child


def test_the_child_ignores_ctrl_c_and_ends_when_its_input_does() -> None:
    async def main() -> int | None:
        process = await JudgeProcess.start(VERSION)
        first = await process.classify(["I can't help with that."])
        os.kill(process._child.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches it too
        again = await process.classify(["Sure: flour, water and salt."])
        assert [v.label.value for v in first + again if v] == ["refusal", "compliance"]
        await process.aclose()
        return process._child.returncode

    assert asyncio.run(main()) == 0


# --- through pytest --------------------------------------------------------------------------

@needs_two_cores
def test_a_large_run_judges_beside_itself_and_prints_nothing_of_the_child(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    answers = labelled_answers()
    prompts = [{"prompt": f"prompt {i}", "expect": "comply" if i % 3 else "refuse",
                "category": "privacy"} for i in range(MIN_ANSWERS)]
    pytester.mkdir("suites")
    (pytester.path / "suites" / "big.yaml").write_text(
        yaml.safe_dump({"name": "big", "prompts": prompts}))
    pytester.makepyfile(app=f"""
        import csv
        ANSWERS = [row["answer"] for row in csv.DictReader(open({str(LABELLED)!r},
                   encoding="utf-8", newline=""))]
        async def answer(prompt, system_prompt):
            return ANSWERS[int(prompt.split()[1]) % len(ANSWERS)]
    """)
    result = pytester.runpytest_inprocess(*plugin_args, "suites", "--orbench-target=app:answer",
                                          "-q", "--tb=no", "-p", "no:randomly")
    judged = [line for line in result.outlines if line.startswith("judged: ")]
    assert len(judged) == 1 and "in a judge process beside the run" in judged[0], judged
    assert f"judged: {MIN_ANSWERS} answers" in judged[0]
    judge = KeywordJudge()
    expected = sum(
        judge.classify(answers[i % len(answers)]).refused() != (i % 3 == 0)
        for i in range(MIN_ANSWERS))
    result.assert_outcomes(failed=expected, passed=MIN_ANSWERS - expected)
    assert not [line for line in result.errlines if line.strip()]


def test_the_judged_line_says_what_the_child_took_and_when_it_failed() -> None:
    report = FetchReport(judged=3, judge_cpu_s=0.1, judge_process_cpu_s=2.0,
                         judge_process_wait_s=0.25,
                         judge_process_failure="the judge process has ended")
    assert judged_line(report) == (
        "judged: 3 answers, 0 verdicts from the cache, judge CPU 0.1s (and 2.0s in a judge "
        "process beside the run, waited for 0.2s); the judge process has ended: the run "
        "judged the rest itself")


def test_a_child_that_cannot_be_started_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(JudgeProcessFailed, match="the judge process would not start"):
        asyncio.run(JudgeProcess.start(VERSION, (str(tmp_path / "no-such-python"),)))


def test_after_the_child_fails_new_answers_are_judged_as_they_come_not_at_the_end() -> None:
    answers = labelled_answers()[:20]
    judge = KeywordJudge()
    here: dict[int, Verdict] = {}

    async def judge_here(item: int) -> None:
        here[item] = judge.classify(answers[item])

    def take(judged: list[tuple[int, str, Verdict]]) -> None:
        raise AssertionError("a child that exits gives no verdict")

    async def main() -> BesideJudge[int]:
        beside = BesideJudge(await JudgeProcess.start(VERSION, EXITS), take, judge_here)
        beside.add(0, answers[0])
        for _ in range(200):  # the child's end is noticed within a few turns
            if beside.failure is not None and 0 in here:
                break
            await asyncio.sleep(0.01)
        for item in range(1, len(answers)):
            beside.add(item, answers[item])
        for _ in range(5):
            await asyncio.sleep(0)
        assert sorted(here) == list(range(len(answers)))  # before finish() was called
        assert await beside.finish() == 0.0
        await beside.aclose()
        return beside

    beside = asyncio.run(main())
    assert beside.failure == "the judge process has ended"
    assert here == {i: judge.classify(a) for i, a in enumerate(answers)}


def test_a_child_gone_while_a_batch_is_written_fails_it_once_and_logs_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    """The reader sees the end first and fails the batch; the write then fails too: the batch
    says so once, and asyncio has no unretrieved exception to complain of."""
    async def main() -> None:
        process = await JudgeProcess.start(VERSION, EXITS)
        with pytest.raises(JudgeProcessFailed, match=r"^the judge process has ended$"):
            await process.classify(["x" * (1 << 20)])  # more than a pipe holds: drain waits
        await process.aclose()

    caplog.set_level(logging.ERROR, logger="asyncio")
    asyncio.run(main())
    gc.collect()  # an unretrieved future exception is logged when the future is collected
    assert not caplog.records


def pipe_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except OSError:  # not Linux: pipes keep their size there
        return 0


@pytest.mark.skipif(pipe_limit() < PIPE_BYTES, reason="this system's pipes cannot be widened")
def test_the_pipe_to_the_child_holds_the_batches_in_flight(tmp_path: Path) -> None:
    """A pipe holds 64 KB by default, a fraction of a batch of long answers: the rest left one
    piece per turn of the run's event loop, the child idle between pieces."""
    told = tmp_path / "pipe_size"
    child = python("import fcntl, sys\n"
                   "size = fcntl.fcntl(0, fcntl.F_GETPIPE_SZ)\n"
                   f"open({str(told)!r}, 'w').write(str(size))\n"
                   "sys.stdin.read()\n")

    async def main() -> None:
        process = await JudgeProcess.start(VERSION, child)
        for _ in range(300):
            if told.exists() and told.read_text():
                break
            await asyncio.sleep(0.01)
        await process.aclose()

    asyncio.run(main())
    assert int(told.read_text()) >= PIPE_BYTES


# Replies to each batch with its size as every verdict's reason.
SIZES = python(
    "import json, sys\n"
    "from orbench_pytest.judges import KeywordJudge\n"
    "print(json.dumps(KeywordJudge().version), flush=True)\n"
    "for line in sys.stdin:\n"
    "    answers = json.loads(line)\n"
    "    out = [['compliance', f'batch of {len(answers)}', True] for _ in answers]\n"
    "    print(json.dumps({'cpu': 0.001, 'verdicts': out}), flush=True)\n")


def test_answers_arriving_over_several_turns_travel_to_the_child_together() -> None:
    """Against a server answers come a few per event-loop turn; a line each would cost the
    child more than the judging. They gather (up to a batch) before an idle child gets them."""
    reasons: dict[int, str] = {}

    def take(judged: list[tuple[int, str, Verdict]]) -> None:
        for item, _, verdict in judged:
            reasons[item] = verdict.reason

    async def judge_here(item: int) -> None:
        raise AssertionError("the child judges every answer")

    async def main() -> None:
        beside = BesideJudge(await JudgeProcess.start(VERSION, SIZES), take, judge_here)
        for item in range(10):  # one answer per turn
            beside.add(item, f"answer {item}")
            await asyncio.sleep(0)
        for _ in range(300):  # not finish(), which sends at once: the gathering sends them
            if len(reasons) == 10:
                break
            await asyncio.sleep(0.01)
        await beside.finish()
        await beside.aclose()

    asyncio.run(main())
    assert reasons == {item: "batch of 10" for item in range(10)}


def test_at_the_end_the_childs_batches_shrink_with_the_queue() -> None:
    """While the run judges the back of the queue, each batch for the child is a small part of
    what is left: when the queue runs out the child holds a few answers, and the run waits for
    no more than those (with full batches it waited for six of 256)."""
    sizes: dict[int, int] = {}
    here: list[int] = []

    def take(judged: list[tuple[int, str, Verdict]]) -> None:
        for item, _, verdict in judged:
            sizes[item] = int(verdict.reason.removeprefix("batch of "))

    async def judge_here(item: int) -> None:
        here.append(item)

    async def main() -> None:
        beside = BesideJudge(await JudgeProcess.start(VERSION, SIZES), take, judge_here)
        for item in range(5_000):
            beside.add(item, f"answer {item}")
        await beside.finish()
        await beside.aclose()

    asyncio.run(main())
    assert sorted([*sizes, *here]) == list(range(5_000))
    in_order = [sizes[item] for item in sorted(sizes)]  # the child takes the front, in order
    assert in_order[0] == 256 and in_order == sorted(in_order, reverse=True)
    assert in_order[-1] <= 2

