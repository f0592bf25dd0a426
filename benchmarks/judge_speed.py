"""What the offline judge costs: import, per answer, and what it adds to end-to-end runs.

    python benchmarks/judge_speed.py [--n 80359] [--latency 0.3] [--server-concurrency 256]
                                     [--repeat 3] [--server-repeat 1] [--skip-e2e]
                                     [--skip-server] [--skip-upgrade] [--no-in-run]
                                     [--also DIR ...]

1. Import: a fresh interpreter imports orbench_pytest.judges.judge and makes the keyword judge (the
   classifier is parsed lazily, on the first answer), then also parses the bundled classifier
   (median of 5 processes each), against a bare interpreter.
2. Per answer: the keyword judge (rules + classifier) on N distinct, realistic answers
   (refusals, partial refusals, answers of 300-1,500 characters, each naming its prompt so no
   two are equal and the memo never helps), then the same answers again (memo hits), then one
   stock refusal under many prompts (the memo keeps it by answer alone); and the
   classifier alone (`ClassifierModel.probability`) on the answers whose verdict needs it.
3. What judging adds to a run, defined so that moving work elsewhere cannot hide it: the same
   pytest command run with the judge as shipped and with a judge that only looks up verdicts
   computed before the run (`lookup`: no judging at all), each with a fresh cache; judging's
   cost is the difference in total CPU (user + sys of the run's process and of every process
   it started: wait4's rusage) and in wall time. Where the checkout has a judge process, a
   third mode judges in the run's own process (`in-run`). `--also DIR` adds the judge as
   shipped of another checkout (its package first on the run's path), in the same turns: a
   before / after comparison under the same drift.
   (a) N prompts, `--orbench-target` returning those answers at once (an instant endpoint),
       then (d) the same command again after the cache's verdicts are deleted, as a new judge
       version finds it (every cached answer judged again, no request), --repeat turns of the
       modes in turn (this host drifts), medians;
   (c) N prompts against a local OpenAI-compatible server (tests/openai_server.py, in this
       process: its CPU is not the run's) answering after --latency seconds, at
       --orbench-concurrency=--server-concurrency, --server-repeat turns.
   The judge's own "judged:" summary line is printed beside each run.
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
from typing import Any

from _common import (
    OR_BENCH_80K,
    PYTEST,
    Run,
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
JUDGED = re.compile(r"judged: .*")


def import_cost() -> tuple[float, float, float]:
    def timed(code: str) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
            runs.append(time.perf_counter() - started)
        return statistics.median(runs)

    bare = timed("pass")
    judge = timed("import orbench_pytest.judges.judge as j; j.OfflineJudge()")
    loaded = timed("import orbench_pytest.judges.judge as j; j.OfflineJudge().model")
    return bare, judge, loaded


MEMO_ANSWERS = 5_000  # fewer than the judge's memo keeps: a repeat of recent answers


STOCK_REFUSAL = "I'm sorry, but I can't help with that."


def judge_cost(prompts: list[str], answers: list[str]) -> tuple[float, float, float, int]:
    """Each answer judged with its prompt, as a run judges it; then the last MEMO_ANSWERS
    again; then a stock refusal under each of the last MEMO_ANSWERS prompts (as a model
    refuses hundreds of prompts with the same words). CPU seconds of each, and the refusals."""
    from orbench_pytest.core.types import Label
    from orbench_pytest.judges.judge import OfflineJudge

    judge = OfflineJudge()
    pairs = list(zip(answers, prompts, strict=True))
    started = time.process_time()
    refusals = sum(judge.classify(a, p).label in (Label.REFUSAL, Label.PARTIAL_REFUSAL)
                   for a, p in pairs)
    cold = time.process_time() - started
    started = time.process_time()
    for a, p in pairs[-MEMO_ANSWERS:]:
        judge.classify(a, p)
    warm = time.process_time() - started
    started = time.process_time()
    for p in prompts[-MEMO_ANSWERS:]:
        judge.classify(STOCK_REFUSAL, p)
    stock = time.process_time() - started
    return cold, warm, stock, refusals


def classifier_cost(prompts: list[str], answers: list[str]) -> tuple[float, int]:
    """CPU seconds of the classifier alone on the answers the rules do not settle, and their
    number: what the classifier costs per answer that reaches it."""
    from orbench_pytest.judges.judge import OfflineJudge
    from orbench_pytest.judges.request import Request
    from orbench_pytest.judges.text import prepared_parts

    judge = OfflineJudge()
    model = judge.model
    reaching = []
    for answer, prompt in zip(answers, prompts, strict=True):
        text, closing = prepared_parts(answer, model.reads_closing)
        rules = judge.rules.classify_prepared(text, Request(prompt))
        if judge._settled_by_rules(rules) is None:
            reaching.append((text, closing))
    started = time.process_time()
    for text, closing in reaching:
        model.probability(text, closing)
    return time.process_time() - started, len(reaching)


MODES_CONFTEST = """\
import os
import pickle

mode = os.environ.get("ORBENCH_BENCH_JUDGE")
if mode in ("in-run", "lookup"):
    import orbench_pytest.run.judged_fetch as fetcher
    if hasattr(fetcher, "worth_a_process"):  # a checkout with a judge process: not used
        fetcher.worth_a_process = lambda *args, **kwargs: False
if mode == "lookup":
    import orbench_pytest.judges.judge as judges
    # KeywordJudge: the offline judge's name in checkouts from before the rename
    offline = getattr(judges, "OfflineJudge", None) or judges.KeywordJudge
    with open(os.environ["ORBENCH_BENCH_VERDICTS"], "rb") as f:
        VERDICTS = pickle.load(f)
    offline.classify = lambda self, answer, prompt="": VERDICTS[answer]
"""


def has_judge_process(checkout: Path) -> bool:
    return (checkout / "orbench_pytest" / "judge_process.py").exists()


# (what the summary calls it, the checkout whose package runs, ORBENCH_BENCH_JUDGE)
Mode = tuple[str, Path, str]


def timed_run(command: list[str], root: Path, env: dict[str, str], what: str) -> Run:
    before = load()
    done = run_process(command, root, env, ok_codes=(0, 1))  # 1: expected mismatches failed
    judged = JUDGED.search(done.output)
    print(f"  {what}: {done.wall_s:.1f} s wall, {done.cpu_s:.1f} s CPU (all processes); "
          f"{judged[0] if judged else 'no judged: line'}; load before {before}, after {load()}",
          flush=True)
    return done


def forget_verdicts(cache: Path) -> None:
    """The cache as a new judge version finds it: every answer, none of its verdicts."""
    import sqlite3

    with sqlite3.connect(cache) as db:
        db.execute("DELETE FROM judgments")
    db.close()


def summarise(case: str, runs: dict[str, list[Run]]) -> None:
    """Each mode's medians, and what judging adds over `lookup`."""
    wall = {mode: statistics.median(r.wall_s for r in rs) for mode, rs in runs.items()}
    cpu = {mode: statistics.median(r.cpu_s for r in rs) for mode, rs in runs.items()}
    turns = len(runs["lookup"])
    print(f"{case} (medians of {turns}): lookup {wall['lookup']:.1f} s wall, "
          f"{cpu['lookup']:.1f} s CPU")
    for mode in runs:
        if mode == "lookup":
            continue
        added = wall[mode] - wall["lookup"]
        print(f"  {mode}: {wall[mode]:.1f} s wall, {cpu[mode]:.1f} s CPU; judging adds "
              f"{cpu[mode] - cpu['lookup']:+.1f} s CPU (all processes) and {added:+.1f} s wall "
              f"= {added / wall[mode]:+.1%} of the run; each turn's wall added: "
              + ", ".join(f"{a.wall_s - b.wall_s:+.1f}" for a, b in zip(runs[mode],
                                                                        runs["lookup"],
                                                                        strict=True)))


def modes(also: list[Path], in_run: bool = True) -> list[Mode]:
    here = [("lookup", REPO, "lookup"), ("shipped", REPO, "shipped")]
    if in_run and has_judge_process(REPO):
        here.insert(1, ("in-run", REPO, "in-run"))
    return here + [(f"shipped by {checkout}", checkout, "shipped") for checkout in also]


def mode_env(env: dict[str, str], root: Path, mode: Mode) -> dict[str, str]:
    return {**env, "ORBENCH_BENCH_JUDGE": mode[2], "PYTHONPATH": f"{root}:{mode[1]}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=OR_BENCH_80K)
    ap.add_argument("--latency", type=float, default=0.3,
                    help="the local server's seconds per reply (default 0.3)")
    ap.add_argument("--server-concurrency", type=int, default=256,
                    help="--orbench-concurrency of the runs against the server (default 256)")
    ap.add_argument("--skip-e2e", action="store_true", help="only import and per-answer cost")
    ap.add_argument("--repeat", type=int, default=3,
                    help="turns of the instant endpoint's runs (default 3; 0: none)")
    ap.add_argument("--server-repeat", type=int, default=1,
                    help="turns of the runs against the server (default 1)")
    ap.add_argument("--skip-server", action="store_true", help="no run against the server")
    ap.add_argument("--skip-upgrade", action="store_true", help="no (d)")
    ap.add_argument("--also", type=Path, action="append", default=[],
                    help="another checkout whose judge runs as shipped beside this one's")
    ap.add_argument("--no-in-run", action="store_true", help="no in-run mode")
    args = ap.parse_args(argv)

    bare, with_judge, loaded = import_cost()
    print(f"import: bare interpreter {bare * 1000:.0f} ms; importing the judges and making the "
          f"keyword judge {with_judge * 1000:.0f} ms (+{(with_judge - bare) * 1000:.0f} ms); "
          f"and parsing the classifier {loaded * 1000:.0f} ms (+{(loaded - bare) * 1000:.0f} ms)")

    with tempfile.TemporaryDirectory() as tmp:
        root = synthesise(Path(tmp), args.n)
        (root / "bench_answers.py").write_text(ANSWERS_MODULE)
        namespace: dict[str, Any] = {}  # the same code the target runs (a module there)
        exec(compile(ANSWERS_MODULE, "bench_answers", "exec"), namespace)

        prompts = read_prompts(root)
        answers = [namespace["compose"](p) for p in prompts]
        assert len(set(answers)) == len(answers), "answers must be distinct"
        cold, warm, stock, refusals = judge_cost(prompts, answers)
        repeats = min(len(answers), MEMO_ANSWERS)
        print(f"per answer: {cold / len(answers) * 1e6:.0f} µs distinct "
              f"({cold:.1f} s CPU for {len(answers)}, {refusals} refusals), "
              f"{warm / repeats * 1e6:.1f} µs repeated (memo: the last "
              f"{repeats} answers again), {stock / repeats * 1e6:.1f} µs a stock refusal "
              f"under another prompt ({STOCK_REFUSAL!r} to the last {repeats}); "
              f"load {load()}")
        clf, reaching = classifier_cost(prompts, answers)
        print(f"classifier alone: {clf / reaching * 1e6:.0f} µs per answer that reaches it "
              f"({reaching} of {len(answers)}); load {load()}", flush=True)
        if args.skip_e2e:
            return 0
        import pickle

        from orbench_pytest.judges.judge import OfflineJudge

        judge = OfflineJudge()
        verdicts = root / "verdicts.pickle"
        verdicts.write_bytes(pickle.dumps({a: judge.classify(a, p)
                                           for a, p in zip(answers, prompts, strict=True)}))
        (root / "conftest.py").write_text(MODES_CONFTEST)
        env, plugin = pytest_env(root)
        env["ORBENCH_BENCH_VERDICTS"] = str(verdicts)
        every = modes(args.also, not args.no_in_run)
        common = [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-judge=keyword",
                  "--orbench-subset=all"]
        instant = [*common, "--orbench-target=bench_answers:answer", "--orbench-concurrency=64"]
        # Untimed: the first run compiles every module's bytecode (PYCACHE).
        warm_up = synthesise(Path(tmp) / "warm-up", 20)
        (warm_up / "bench_answers.py").write_text(ANSWERS_MODULE)
        for index, mode in enumerate(every):  # untimed, 20 prompts: each checkout's bytecode
            small = [*common, "--orbench-target=bench_answers:answer",
                     f"--orbench-cache-path={warm_up / f'{index}.sqlite3'}"]
            run_process(small, warm_up, {**mode_env(env, warm_up, mode), "ORBENCH_BENCH_JUDGE": ""},
                        ok_codes=(0, 1))
        first: dict[str, list[Run]] = {mode[0]: [] for mode in every}
        upgrade: dict[str, list[Run]] = {mode[0]: [] for mode in every}
        for turn in range(args.repeat):
            for index, mode in enumerate(every):
                cache = root / f"instant-{index}-{turn}.sqlite3"
                run_env = mode_env(env, root, mode)
                command = [*instant, f"--orbench-cache-path={cache}"]
                first[mode[0]].append(timed_run(command, root, run_env,
                                                f"(a) {args.n} prompts, instant, {mode[0]}, "
                                                f"turn {turn + 1}"))
                if not args.skip_upgrade:
                    forget_verdicts(cache)
                    upgrade[mode[0]].append(timed_run(command, root, run_env,
                                                      f"(d) re-judge after a judge upgrade, "
                                                      f"{mode[0]}, turn {turn + 1}"))
                cache.unlink()
        if args.repeat:
            summarise(f"(a) first run, {args.n} prompts, instant endpoint", first)
        if args.repeat and not args.skip_upgrade:
            summarise(f"(d) re-run after a judge upgrade, {args.n} cached answers", upgrade)
        if args.skip_server:
            return 0
        server_runs(root, env, common, args, every, namespace["compose"])
    return 0


def server_runs(root: Path, env: dict[str, str], common: list[str], args: argparse.Namespace,
                every: list[Mode], compose: Callable[[str], str]) -> None:
    from tests.openai_server import OpenAIServer, Reply

    runs: dict[str, list[Run]] = {mode[0]: [] for mode in every}
    with OpenAIServer(lambda prompt, system, body: Reply(text=compose(prompt)),
                      latency_s=args.latency) as server:
        for turn in range(args.server_repeat):
            for index, mode in enumerate(every):
                cache = root / f"server-{index}-{turn}.sqlite3"
                command = [*common, "--orbench-model=bench", f"--orbench-base-url={server.url}",
                           f"--orbench-concurrency={args.server_concurrency}",
                           f"--orbench-cache-path={cache}"]
                runs[mode[0]].append(timed_run(command, root, mode_env(env, root, mode),
                                               f"(c) {args.n} prompts, "
                                               f"{args.latency * 1000:.0f} ms server, {mode[0]}, "
                                               f"turn {turn + 1}"))
                cache.unlink()
    summarise(f"(c) first run, {args.n} prompts, server answering after "
              f"{args.latency * 1000:.0f} ms, concurrency {args.server_concurrency}", runs)


if __name__ == "__main__":
    raise SystemExit(main())
