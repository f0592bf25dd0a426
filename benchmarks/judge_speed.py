"""What the offline judge costs: import, per answer, and its share of end-to-end runs.

    python benchmarks/judge_speed.py [--n 80359] [--server-n 20000] [--latency 0.3]
                                     [--repeat 3] [--skip-e2e] [--skip-server]

1. Import: a fresh interpreter imports orbench_pytest.judges and makes the keyword judge (the
   classifier is parsed lazily, on the first answer), then also parses the bundled classifier
   (median of 5 processes each), against a bare interpreter.
2. Per answer: the keyword judge (rules + classifier) on N distinct, realistic answers
   (refusals, partial refusals, answers of 300-1,500 characters, each naming its prompt so no
   two are equal and the memo never helps), then the same answers again (memo hits); and the
   classifier alone (`ClassifierModel.probability`) on the answers whose verdict needs it.
3. Shares, each what judging cost that run over the run's wall time, target at most 5%. The
   cost is read from the run's own "judged:" summary line: the CPU judging took in the run's
   thread (judging, hashing verdicts' keys, reading and writing stored verdicts, and in a large
   run sending answers to the judge process and reading its verdicts), plus the time the run
   waited for the judge process's last verdicts; the judge process's own CPU, on another core,
   is printed beside it.
   (a) N prompts through pytest end to end, `--orbench-target` returning those answers at
   once, keyword judge, a fresh cache; (b) the same command again over the now cached answers
   and judgments (a CI re-run); (d) the same command after the cache's verdicts are deleted,
   as a new judge version finds it (every cached answer judged again), --repeat times, and
   the median share (it lies near the target, and this host drifts); then the wall time
   judging adds to (a): (a) again against
   (a0) the same run whose judge only looks up the same verdicts (computed before it), and
   (a1) the same run judging in its own thread (no judge process), the three in turn
   --repeat times, medians; (c)
   --server-n prompts against a local OpenAI-compatible server (tests/openai_server.py, in
   this process) answering the same texts after --latency seconds each, at the default
   adaptive concurrency, a fresh cache.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    OR_BENCH_80K,
    PYTEST,
    load,
    pytest_env,
    read_prompts,
    run_process,
    synthesise,
)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ANSWERS_MODULE = '''\
import zlib

OPENINGS = [
    "I'm sorry, but I can't help with {p}. If you have other questions, feel free to ask!",
    "As an AI language model, I do not condone {p}. However, here are some safer ways to "
    "think about the underlying problem: talk to someone you trust, and read about the law.",
    "I understand why you ask about {p}, but I must point out that this could hurt people. "
    "Instead, consider the following resources and general guidance on staying safe.",
    "Sure! Here is an overview of {p}. 1. Start by reading about the background and history. "
    "2. Gather the materials you need and check local rules. 3. Work step by step, noting "
    "what changes. 4. Review the result and ask an expert when in doubt.",
    "It's important to note that {p} depends on where you live. That said, the general "
    "approach is: first, define the goal clearly; second, list the constraints; third, "
    "compare the options by cost and risk; finally, decide and document the decision.",
    "Great question. {p} can be approached from several angles. Historically, people have "
    "used a mix of planning, negotiation and careful communication. In practice you would "
    "begin with research, then draft a plan, test it on a small scale and refine it.",
]
BODY = (" In more detail, each step deserves attention: the context, the people involved, the "
        "resources, the timeline and what could go wrong. Writing these down makes the plan "
        "easier to follow and to review later.")


def compose(prompt):
    index = zlib.crc32(prompt.encode()) % len(OPENINGS)
    return OPENINGS[index].format(p=prompt[:-1].lower()) + BODY * (index % 4)


async def answer(prompt, system_prompt):
    return compose(prompt)
'''
JUDGED = re.compile(r"judged: (\d+) answers, (\d+) verdicts from the cache, judge CPU "
                    r"([\d.]+)s(?: \(and ([\d.]+)s in a judge process beside the run, waited "
                    r"for ([\d.]+)s\))?")


def import_cost() -> tuple[float, float, float]:
    def timed(code: str) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
            runs.append(time.perf_counter() - started)
        return statistics.median(runs)

    bare = timed("pass")
    judge = timed("import orbench_pytest.judges as j; j.KeywordJudge()")
    loaded = timed("import orbench_pytest.judges as j; j.KeywordJudge().model")
    return bare, judge, loaded


MEMO_ANSWERS = 5_000  # fewer than the judge's memo keeps: a repeat of recent answers


def judge_cost(answers: list[str]) -> tuple[float, float, int]:
    from orbench_pytest.judges import KeywordJudge
    from orbench_pytest.types import Label

    judge = KeywordJudge()
    started = time.process_time()
    refusals = sum(judge.classify(a).label in (Label.REFUSAL, Label.PARTIAL_REFUSAL)
                   for a in answers)
    cold = time.process_time() - started
    started = time.process_time()
    for a in answers[-MEMO_ANSWERS:]:
        judge.classify(a)
    warm = time.process_time() - started
    return cold, warm, refusals


def classifier_cost(answers: list[str]) -> tuple[float, int]:
    """CPU seconds of the classifier alone on the answers the rules do not settle, and their
    number: what the classifier costs per answer that reaches it."""
    from orbench_pytest.judge_text import prepared_parts
    from orbench_pytest.judges import KeywordJudge

    judge = KeywordJudge()
    model = judge.model
    reaching = []
    for answer in answers:
        text, closing = prepared_parts(answer, model.reads_closing)
        if judge._settled_by_rules(judge.rules.classify_prepared(text)) is None:
            reaching.append((text, closing))
    started = time.process_time()
    for text, closing in reaching:
        model.probability(text, closing)
    return time.process_time() - started, len(reaching)


def timed_run(command: list[str], root: Path, env: dict[str, str], what: str
              ) -> tuple[float, float]:
    """Run one pytest command; print its wall, the judge's cost and share, and the load.
    Returns the wall seconds and the share."""
    before = load()
    done = run_process(command, root, env, ok_codes=(0, 1))  # 1: expected mismatches failed
    judged = JUDGED.search(done.output)
    if judged is None:
        raise SystemExit(f"{what}: no 'judged:' line in the run's summary")
    fresh, stored, cpu = int(judged[1]), int(judged[2]), float(judged[3])
    beside, waited = float(judged[4] or 0), float(judged[5] or 0)
    cost = cpu + waited
    process = (f" + {waited:.2f} s waiting for the judge process, which took {beside:.1f} s "
               f"CPU on another core" if judged[4] else "")
    print(f"{what}: {done.wall_s:.1f} s wall ({done.last_line}); judged {fresh}, {stored} "
          f"verdicts from the cache; judge CPU in the run {cpu:.2f} s{process} = "
          f"{cost / done.wall_s:.1%} of the wall time (target ≤ 5%); load before {before}, "
          f"after {load()}")
    return done.wall_s, cost / done.wall_s


def forget_verdicts(cache: Path) -> None:
    """The cache as a new judge version finds it: every answer, none of its verdicts."""
    import sqlite3

    with sqlite3.connect(cache) as db:
        db.execute("DELETE FROM judgments")
    db.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=OR_BENCH_80K)
    ap.add_argument("--server-n", type=int, default=20_000,
                    help="prompts of the run against the local server (default 20,000)")
    ap.add_argument("--latency", type=float, default=0.3,
                    help="the local server's seconds per reply (default 0.3)")
    ap.add_argument("--skip-e2e", action="store_true", help="only import and per-answer cost")
    ap.add_argument("--repeat", type=int, default=3,
                    help="turns of (d), and of the three runs measuring the wall time "
                         "judging adds")
    ap.add_argument("--skip-server", action="store_true", help="no run against the server")
    args = ap.parse_args(argv)

    bare, with_judge, loaded = import_cost()
    print(f"import: bare interpreter {bare * 1000:.0f} ms; importing the judges and making the "
          f"keyword judge {with_judge * 1000:.0f} ms (+{(with_judge - bare) * 1000:.0f} ms); "
          f"and parsing the classifier {loaded * 1000:.0f} ms (+{(loaded - bare) * 1000:.0f} ms)")

    with tempfile.TemporaryDirectory() as tmp:
        root = synthesise(Path(tmp), args.n)
        (root / "bench_answers.py").write_text(ANSWERS_MODULE)
        sys.path.insert(0, str(root))
        import bench_answers

        prompts = read_prompts(root)
        answers = [bench_answers.compose(p) for p in prompts]
        assert len(set(answers)) == len(answers), "answers must be distinct"
        cold, warm, refusals = judge_cost(answers)
        repeats = min(len(answers), MEMO_ANSWERS)
        print(f"per answer: {cold / len(answers) * 1e6:.0f} µs distinct "
              f"({cold:.1f} s CPU for {len(answers)}, {refusals} refusals), "
              f"{warm / repeats * 1e6:.1f} µs repeated (memo: the last "
              f"{repeats} answers again); load {load()}")
        clf, reaching = classifier_cost(answers)
        print(f"classifier alone: {clf / reaching * 1e6:.0f} µs per answer that reaches it "
              f"({reaching} of {len(answers)}); load {load()}")
        if args.skip_e2e:
            return 0
        env, plugin = pytest_env(root)
        env["PYTHONPATH"] = f"{root}:{env['PYTHONPATH']}"
        common = [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-judge=keyword",
                  "--orbench-subset=all"]
        command = [*common, "--orbench-target=bench_answers:answer", "--orbench-concurrency=64",
                   f"--orbench-cache-path={root / 'cache.sqlite3'}"]
        timed_run(command, root, env, f"(a) first run, {args.n} prompts, in-process target")
        timed_run(command, root, env, "(b) re-run over the cached answers and judgments")
        shares = []
        for turn in range(args.repeat):  # (d) is near the target: a median, not one run
            forget_verdicts(root / "cache.sqlite3")
            shares.append(timed_run(command, root, env, "(d) re-run after a judge upgrade: "
                                    f"cached answers, none judged by this judge, turn "
                                    f"{turn + 1}")[1])
        print(f"(d) median share {statistics.median(shares):.1%} (target ≤ 5%); each turn: "
              + ", ".join(f"{share:.1%}" for share in shares))
        wall_added(root, env, command, answers, args.repeat)
        if args.skip_server:
            return 0
        server_run(root, env, common, args.server_n, args.latency, bench_answers.compose)
    return 0


# The references for the wall time judging adds, chosen by ORBENCH_BENCH_JUDGE in the run:
# "here" keeps the judge in the run's thread; "lookup" also makes it a lookup of verdicts the
# benchmark computed before the run, so the run has every verdict and does no judging.
REFERENCE_CONFTEST = """\
import os
import pickle

mode = os.environ.get("ORBENCH_BENCH_JUDGE")
if mode in ("here", "lookup"):
    import orbench_pytest.fetcher as fetcher
    fetcher.worth_a_process = lambda *args, **kwargs: False
if mode == "lookup":
    from orbench_pytest.judges import KeywordJudge
    with open(os.environ["ORBENCH_BENCH_VERDICTS"], "rb") as f:
        VERDICTS = pickle.load(f)
    KeywordJudge.classify = lambda self, answer: VERDICTS[answer]
"""


def wall_added(root: Path, env: dict[str, str], command: list[str], answers: list[str],
               repeat: int) -> None:
    """(a) again beside (a0) a run that only looks verdicts up and (a1) one judging in its own
    thread, each with a fresh cache, the three in turn `repeat` times (this host's speed
    drifts by 10% within minutes): the median wall seconds judging adds, either way."""
    import pickle

    from orbench_pytest.judges import KeywordJudge

    judge = KeywordJudge()
    verdicts = root / "verdicts.pickle"
    verdicts.write_bytes(pickle.dumps({a: judge.classify(a) for a in answers}))
    (root / "conftest.py").write_text(REFERENCE_CONFTEST)
    walls: dict[str, list[float]] = {"lookup": [], "here": [], "beside": []}
    for turn in range(repeat):
        for mode, what in (("lookup", "(a0) the first run again, its judge a lookup"),
                           ("here", "(a1) the first run again, judging in the run's thread"),
                           ("beside", "(a) the first run again, as it runs")):
            run_env = {**env, "ORBENCH_BENCH_JUDGE": mode,
                       "ORBENCH_BENCH_VERDICTS": str(verdicts)}
            fresh = [*command[:-1], f"--orbench-cache-path={root / f'{mode}-{turn}.sqlite3'}"]
            walls[mode].append(timed_run(fresh, root, run_env, f"{what}, turn {turn + 1}")[0])
    (root / "conftest.py").unlink()
    reference = statistics.median(walls["lookup"])
    for mode, how in (("beside", "with the judge process"), ("here", "judging in the run")):
        wall = statistics.median(walls[mode])
        added = wall - reference
        print(f"wall time judging adds {how}: median {wall:.1f} s against {reference:.1f} s "
              f"= {added:.1f} s, {added / wall:.1%} of that run (target ≤ 5%); each turn: "
              + ", ".join(f"{w - r:+.1f} s" for w, r in zip(walls[mode], walls["lookup"],
                                                            strict=True)))


def server_run(root: Path, env: dict[str, str], common: list[str], n: int, latency_s: float,
               compose: Callable[[str], str]) -> None:
    from tests.openai_server import OpenAIServer, Reply

    csv_path = root / "suites" / "prompts.csv"
    lines = csv_path.read_text(encoding="utf-8").splitlines(keepends=True)
    csv_path.write_text("".join(lines[:n + 1]), encoding="utf-8")  # header and n prompts
    with OpenAIServer(lambda prompt, system, body: Reply(text=compose(prompt)),
                      latency_s=latency_s) as server:
        command = [*common, "--orbench-model=bench", f"--orbench-base-url={server.url}",
                   f"--orbench-cache-path={root / 'server.sqlite3'}"]
        timed_run(command, root, env, f"(c) first run, {n} prompts, local server answering "
                                      f"after {latency_s * 1000:.0f} ms, adaptive concurrency")


if __name__ == "__main__":
    raise SystemExit(main())
