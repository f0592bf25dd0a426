"""The offline judge in a process of its own, beside the fetch.

A large run judges tens of thousands of answers. In the run's own process that CPU adds to the
run's time whenever answers arrive faster than they are judged (an in-process target, a fast
server). A child process judges them on another core while the run goes on asking, and the run
waits only for the last batch.

The child is `python -m orbench_pytest.judge_process`, with this copy of the package first on
its path: a plain interpreter, not multiprocessing, so the user's `__main__` (a script that
calls `pytest.main`) is never imported again in it. It makes the bundled keyword judge and
says its version on its first line; the parent uses it only for the same judge. Batches travel
as JSON lines (the answers that arrived within a quarter of a second, or a full batch) and come
back in order. SIGINT is the parent's business: the child ends when its input does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Generic, TypeVar

try:
    import fcntl
except ImportError:  # not on Unix
    fcntl = None  # type: ignore[assignment]

from .judges import KeywordJudge
from .types import Label, Verdict

# Below this many answers to judge, starting a child costs more than it saves.
MIN_ANSWERS = 2_000
_BATCH = 256  # answers per line to the child: few lines, and verdicts come back steadily
# Batches sent and not yet answered: the child never waits for the next one, even while the
# run writes a batch of verdicts (0.1 s; with 2 the child sat idle through each).
_IN_FLIGHT = 6
# What the pipe to the child holds: batches in flight, whole (a Linux pipe holds 64 KB, a
# fraction of a batch: the rest left one piece per turn of the run's event loop, and the child
# waited between pieces, idle for 1.9 s of a 4.5 s re-judge of 80K answers).
PIPE_BYTES = 1 << 20
# How long answers gather before an idle child gets them. Against a server they arrive a few
# per event-loop turn: a line per turn cost the child twice the CPU of judging them here, a
# line per quarter second 15% more (20,000 answers: 2.6 s, 1.5 s, 1.3 s; judge_speed.py (c)).
_GATHER_S = 0.25
_HERE = 32  # answers the run judges itself at a time while it waits (then it reads replies)
_LINE_LIMIT = 1 << 26  # a batch's verdicts as one line: far above any batch's size
_EXIT_WAIT_S = 1.0


def widen_pipe(stream: asyncio.StreamWriter) -> None:
    """The pipe under `stream` made to hold PIPE_BYTES where the system allows it (Linux, within
    the user's pipe quota); elsewhere it keeps its size: slower, never wrong."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # None: no fcntl, or no such call
    pipe = stream.get_extra_info("pipe")
    if set_size is None or pipe is None:
        return
    try:
        fcntl.fcntl(pipe.fileno(), set_size, PIPE_BYTES)
    except OSError:
        pass


def cores_for_this_run() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worth_a_process(judge: object, answers: int, *, min_answers: int = MIN_ANSWERS) -> bool:
    """Whether judging `answers` answers in a process of its own can shorten the run: the
    bundled keyword judge (the one the child makes), enough answers, and a second core."""
    return (type(judge) is KeywordJudge and answers >= min_answers
            and cores_for_this_run() >= 2)


class JudgeProcessFailed(Exception):
    """The child could not judge: it would not start, ended, or is not this run's judge."""


class JudgeProcess:
    """The parent's side: `classify` sends a batch and awaits its verdicts (None for an answer
    whose judging raised in the child: the caller judges that one itself)."""

    def __init__(self, child: asyncio.subprocess.Process, judge_version: str) -> None:
        self._child = child
        self._judge_version = judge_version
        # Each batch sent and not yet answered: its future and its number of answers.
        self._waiting: deque[tuple[asyncio.Future[list[Verdict | None]], int]] = deque()
        self._reader: asyncio.Task[None] | None = None
        self._verdicts: dict[tuple[str, str, bool], Verdict] = {}  # few distinct ones
        self.cpu_s = 0.0  # CPU seconds the child spent judging
        self.parent_cpu_s = 0.0  # and this process spent sending answers, reading verdicts

    @classmethod
    async def start(cls, judge_version: str,
                    command: Sequence[str] = (sys.executable, "-m", __name__)) -> JudgeProcess:
        """`command`: the child (another one only in tests: children that fail)."""
        package_root = str(Path(__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        try:
            child = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
                limit=_LINE_LIMIT)
        except OSError as exc:  # no such interpreter, no processes left
            raise JudgeProcessFailed(
                f"the judge process would not start ({exc.strerror or exc})") from exc
        if child.stdin is not None:
            widen_pipe(child.stdin)
        return cls(child, judge_version)

    async def classify(self, answers: list[str]) -> list[Verdict | None]:
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._read())
        if self._reader.done():
            raise JudgeProcessFailed("the judge process has ended")
        stdin = self._child.stdin
        assert stdin is not None
        waiting: asyncio.Future[list[Verdict | None]] = asyncio.get_running_loop().create_future()
        self._waiting.append((waiting, len(answers)))
        started = time.thread_time()
        stdin.write(json.dumps(answers).encode() + b"\n")
        self.parent_cpu_s += time.thread_time() - started
        try:
            await stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            if not waiting.done():  # else the reader failed it already, and says why below
                waiting.cancel()
                raise JudgeProcessFailed("the judge process has ended") from exc
        return await waiting

    async def _read(self) -> None:
        stdout = self._child.stdout
        assert stdout is not None
        try:
            first = await stdout.readline()
            if not first:
                raise JudgeProcessFailed("the judge process has ended")
            version = json.loads(first)
            if version != self._judge_version:
                # repr: escaped, and cut short, whatever the child printed
                raise JudgeProcessFailed(f"the judge process runs judge {repr(version)[:80]}")
            while True:
                line = await stdout.readline()
                if not line:
                    raise JudgeProcessFailed("the judge process has ended")
                started = time.thread_time()
                reply = json.loads(line)
                waiting, size = self._waiting[0]
                verdicts = [self._verdict(v) for v in reply["verdicts"]]
                if len(verdicts) != size:
                    raise JudgeProcessFailed(f"the judge process replied {len(verdicts)} "
                                             f"verdicts to {size} answers")
                self.cpu_s += float(reply["cpu"])
                self._waiting.popleft()
                if not waiting.done():
                    waiting.set_result(verdicts)
                self.parent_cpu_s += time.thread_time() - started
        except Exception as exc:  # every waiting batch learns it failed
            failure = exc if isinstance(exc, JudgeProcessFailed) else JudgeProcessFailed(
                f"the judge process replied {type(exc).__name__}")
            while self._waiting:
                waiting, _ = self._waiting.popleft()
                if not waiting.done():
                    waiting.set_exception(failure)

    def _verdict(self, fields: list[object] | None) -> Verdict | None:
        """A verdict as the child sent it; equal ones are one object, as in the judge."""
        if fields is None:
            return None
        label, reason, confident = fields
        key = (str(label), str(reason), bool(confident))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = Verdict(Label(key[0]), key[1], KeywordJudge.name,
                                                    confident=key[2])
        return verdict

    async def aclose(self) -> None:
        """End the child: its input closes and it exits; one that lingers is killed."""
        if self._reader is not None:
            self._reader.cancel()
        stdin = self._child.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        try:
            await asyncio.wait_for(self._child.wait(), _EXIT_WAIT_S)
        except asyncio.TimeoutError:
            self._child.kill()  # busy with a batch nobody will read
            await self._child.wait()


Item = TypeVar("Item")


class BesideJudge(Generic[Item]):
    """The queue of answers for the judge process: answers gather for up to `_GATHER_S` (or
    until a batch is full) and go to the child in batches, a few in flight. When the run has
    nothing left to ask (`finish`), it judges the back of the queue itself while the child
    takes the front, so its wait for the last verdicts is about half the backlog. Should the
    child fail, the run judges the rest.

    `take(judged)` records a batch's verdicts from the child, (item, answer, verdict) each
    (one call a batch: the engine times its bookkeeping once, not per answer);
    `judge_here(item)` judges one item in this process and records it (the engine's own path,
    its errors included).
    """

    def __init__(self, process: JudgeProcess,
                 take: Callable[[list[tuple[Item, str, Verdict]]], None],
                 judge_here: Callable[[Item], Awaitable[None]]) -> None:
        self._process: JudgeProcess | None = process
        self._take = take
        self._judge_here = judge_here
        self._queued: deque[tuple[Item, str]] = deque()
        self._in_flight: set[asyncio.Task[None]] = set()
        # the pending _send: a call_soon (Handle) or, while answers gather, a TimerHandle
        self._send_timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self.failure: str | None = None  # why the child stopped judging, if it did
        self._finishing = False  # the run judges the back of the queue too (`finish`)
        self.cpu_s = 0.0
        self.parent_cpu_s = 0.0

    def add(self, item: Item, answer: str) -> None:
        self._queued.append((item, answer))
        now = self._process is None or len(self._queued) >= _BATCH
        gathering = isinstance(self._send_timer, asyncio.TimerHandle)
        if self._send_timer is None or (now and gathering):
            if self._send_timer is not None:
                self._send_timer.cancel()
            loop = asyncio.get_running_loop()
            self._send_timer = (loop.call_soon(self._send) if now
                                else loop.call_later(_GATHER_S, self._send))

    def _send(self) -> None:
        """Batches to the child, a few in flight; once it has failed, whatever is queued is
        judged here at once (not left for `finish`)."""
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        if self._process is None and self._queued:
            self._start(None, list(self._queued))
            self._queued.clear()
        while self._process is not None and self._queued and len(self._in_flight) < _IN_FLIGHT:
            size = min(_BATCH, len(self._queued))
            if self._finishing:  # batches shrink with the queue: what the child holds when
                # the run has judged the back of it is a few answers, not _IN_FLIGHT batches
                size = max(1, min(size, len(self._queued) // (2 * _IN_FLIGHT)))
            self._start(self._process, [self._queued.popleft() for _ in range(size)])

    def _start(self, process: JudgeProcess | None, batch: list[tuple[Item, str]]) -> None:
        task = asyncio.ensure_future(self._judge_batch(process, batch))
        self._in_flight.add(task)
        task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._send()

    async def _judge_batch(self, process: JudgeProcess | None,
                           batch: list[tuple[Item, str]]) -> None:
        """The child's verdicts of a batch (`process`), or None: the batch is judged here."""
        verdicts: list[Verdict | None] = [None] * len(batch)
        if process is not None:
            try:
                verdicts = await process.classify([answer for _, answer in batch])
            except JudgeProcessFailed as failure:
                if self._process is process:
                    self.failure = str(failure)
                    self._process = None
                    await self._close(process)
        judged = [(item, answer, verdict)
                  for (item, answer), verdict in zip(batch, verdicts, strict=True)
                  if verdict is not None]
        if judged:
            self._take(judged)
        if len(judged) < len(batch):  # the child failed, or failed on some answers
            for (item, _), verdict in zip(batch, verdicts, strict=True):
                if verdict is None:
                    await self._judge_here(item)

    async def finish(self) -> float:
        """Every queued answer judged; returns the seconds spent waiting for the child."""
        self._finishing = True
        waited = 0.0
        while self._queued or self._in_flight:
            if self._queued and (self._process is None or len(self._queued) > _HERE):
                for _ in range(min(_HERE, len(self._queued))):
                    await self._judge_here(self._queued.pop()[0])
                self._send()
                await asyncio.sleep(0)  # the child's replies are read, the next batch sent
                continue
            started = time.perf_counter()
            if self._in_flight:
                await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
            else:
                self._send()
            waited += time.perf_counter() - started
        return waited

    async def aclose(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
        for task in self._in_flight:
            task.cancel()
        process, self._process = self._process, None
        if process is not None:
            await self._close(process)

    async def _close(self, process: JudgeProcess) -> None:
        self.cpu_s += process.cpu_s
        self.parent_cpu_s += process.parent_cpu_s
        await process.aclose()


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The child's side: the version, then one line of verdicts per line of answers."""
    judge = KeywordJudge()
    judge.model  # parsed now, while the parent still sends its first requests  # noqa: B018
    stdout.write(json.dumps(judge.version).encode() + b"\n")
    stdout.flush()
    for line in stdin:
        started = time.process_time()
        verdicts: list[list[object] | None] = []
        for answer in json.loads(line):
            try:
                verdict = judge.classify(answer)
            except Exception:  # the parent judges it, reports the error
                verdicts.append(None)
                continue
            verdicts.append([verdict.label.value, verdict.reason, verdict.confident])
        reply = {"cpu": time.process_time() - started, "verdicts": verdicts}
        stdout.write(json.dumps(reply).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent ends the run, and us
    try:
        _serve(sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        pass

