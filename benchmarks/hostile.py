"""Hostile input, end to end: every scenario class of the adversarial pass, run through pytest
(or the `orbench` command) in a subprocess as CI runs it, against a raw-socket hostile server.

    python benchmarks/hostile.py [--only CLASS] [--show]

Classes: secrets, injection, exhaustion, internalerror, files. For each case the outcome is
one of: `run` (pytest ran; endpoint trouble shows as per-item errors), `one-line error`
(a usage or collection error of exactly one line), or `BROKEN: why` (a traceback,
INTERNALERROR, a leaked key, a forged log line, a live mention, memory over the bound...).
Prints, per class, the cases tried and how many ended each way; exits 1 if any broke.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import hostile_server as hs  # noqa: E402

CODE = REPO  # the code under test (--code)
KEY = f"sk-hostile-{secrets.token_hex(16)}"
HEX_KEY = secrets.token_hex(16)  # an Azure-style key
JUDGE_KEY = f"sk-judge-{secrets.token_hex(16)}"
RSS_LIMIT_MB = 600  # a pytest process with the plugin uses ~100 MB; a bomb used 2,100
FORGED = "::error title=forged::the build is fine"
ANSI = "\x1b[2K\r\x1b[32morbench gate: PASSED\x1b[0m\x1b[2J\x1b]8;;https://evil.example\x07x\x08\x00"
MENTION = "@octocat"


@dataclass
class Case:
    cls: str
    name: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    script: hs.Script | None = None  # a hostile server for this case, its URL as {url}
    command: str = "pytest"  # or "orbench"
    expect: str = "any"  # run | error | any
    check: Callable[[Path, str], str | None] | None = None  # extra check: a breakage or None
    prepare: Callable[[Path, str], None] | None = None  # (folder, url)


def suite(*prompts: str, name: str = "s", **extra: object) -> str:
    rows = [{"prompt": p, "expect": "comply", "category": "c"} for p in prompts]
    return yaml.safe_dump({"name": name, "prompts": rows, **extra})


def server_args(url: str = "{url}", model: str = "m") -> list[str]:
    return [f"--orbench-model={model}", f"--orbench-base-url={url}", "--orbench-max-retries=0",
            "--orbench-backoff=0.01"]


ALL_OUTPUTS = ["--junitxml=junit.xml", "--orbench-results=results.json",
               "--orbench-cache-path=cache.sqlite3", "-o", "junit_logging=all",
               "--log-file=run.log", "--log-level=DEBUG", "-rA", "-vv"]


# --- checks ------------------------------------------------------------------------------------
def leaked(folder: Path, output: str, keys: tuple[str, ...] = (KEY, HEX_KEY, JUDGE_KEY)
           ) -> str | None:
    """A key in the output or in any file the run wrote (the case's own inputs excepted)."""
    inputs = {folder / name for name in INPUTS.get(folder, ())}
    for key in keys:
        if key in output:
            return "key in the captured output"
        for path in folder.rglob("*"):
            if path.is_file() and path not in inputs and key.encode() in path.read_bytes():
                return f"key in {path.relative_to(folder)}"
    return None


def forged(folder: Path, output: str) -> str | None:
    for line in output.splitlines():
        if line.lstrip().startswith("::") or "##[" in line:
            return f"workflow command in a log line: {line[:80]!r}"
        if "\x1b" in line or "\x07" in line or "\x08" in line or "\x00" in line:
            return f"control character in a log line: {line[:80]!r}"
    return None


def live_markdown(folder: Path, output: str) -> str | None:
    report = folder / "report.md"
    if not report.is_file():
        return "no report written"
    text = report.read_text()
    if re.search(r"(?<![\w\u200b])@[A-Za-z0-9]", text):
        return "a live @mention in the report"
    if re.search(r"https?://evil", text) or re.search(r"(?<!\\)\[[^\]]*\]\(", text):
        return "a live link in the report"
    return forged(folder, text)


def both(*checks: Callable[[Path, str], str | None]) -> Callable[[Path, str], str | None]:
    def check(folder: Path, output: str) -> str | None:
        for one in checks:
            found = one(folder, output)
            if found:
                return found
        return None
    return check


# --- the scenarios -----------------------------------------------------------------------------
def cases() -> list[Case]:
    out: list[Case] = []
    add = out.append

    # secrets: a key planted in a prompt, an answer, an error body, a target's exception.
    env = {"OPENAI_API_KEY": KEY}
    add(Case("secrets", "key in a prompt", {"suites/s.yaml": suite(f"Repeat {KEY} please")},
             [*server_args(), *ALL_OUTPUTS], env, lambda p: hs.answer("I'm sorry, I can't."),
             check=leaked))
    add(Case("secrets", "key echoed in an answer", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], env, lambda p: hs.answer(f"your key is {KEY}"),
             check=leaked))
    add(Case("secrets", "key in a 503 error body", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], env, lambda p: hs.error(503, f"bad key {KEY}"),
             check=leaked))
    add(Case("secrets", "key in a 401 error body", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], env, lambda p: hs.error(401, f"bad key {KEY}"),
             check=leaked))
    app_env = {"OPENAI_API_KEY": KEY, "AZURE_OPENAI_API_KEY": HEX_KEY}
    add(Case("secrets", "app answers with the key", {
        "suites/s.yaml": suite("hi"),
        "app.py": "import os\ndef answer(p, s):\n"
                  "    return 'key ' + os.environ['OPENAI_API_KEY']\n"},
        ["--orbench-target=app:answer", *ALL_OUTPUTS], app_env, check=leaked))
    add(Case("secrets", "app raises with a hex key", {
        "suites/s.yaml": suite("hi"),
        "app.py": "import os\ndef answer(p, s):\n"
                  "    raise RuntimeError('rejected ' + os.environ['AZURE_OPENAI_API_KEY'])\n"},
        ["--orbench-target=app:answer", *ALL_OUTPUTS], app_env, check=leaked))
    add(Case("secrets", "app fails at import", {
        "suites/s.yaml": suite("hi"),
        "app.py": "import os\nraise RuntimeError(os.environ['OPENAI_API_KEY'] + ' '"
                  " + os.environ['AZURE_OPENAI_API_KEY'])\n"},
        ["--orbench-target=app:answer", *ALL_OUTPUTS], app_env, expect="error", check=leaked))
    add(Case("secrets", "judge key echoed by the judge", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-judge=llm", "--orbench-judge-model=j",
              "--orbench-judge-base-url={url}", "--orbench-judge-api-key-env=JUDGE_KEY",
              *ALL_OUTPUTS], {**env, "JUDGE_KEY": JUDGE_KEY},
             lambda p: hs.answer(f"verdict for {JUDGE_KEY}"), check=leaked))
    add(Case("secrets", "password in the base URL", {"suites/s.yaml": suite("hi")},
             [*server_args(url="http://user:" + KEY + "@127.0.0.1:{port}/v1"), *ALL_OUTPUTS],
             {}, lambda p: hs.error(500, f"url had {KEY}"), check=leaked))
    add(Case("secrets", "key in a prompt, orbench report", {"suites/s.yaml": suite(
        f"Repeat {KEY}")}, [*server_args(), *ALL_OUTPUTS], env,
        lambda p: hs.answer(f"Sure: {KEY}"), check=leaked))

    # injection: answers, errors and names that try to forge log lines or ping people.
    for where, script in [
            ("answer", lambda p: hs.answer(f"x\n{FORGED}\n{ANSI}\n##[error]forged")),
            ("refusal answer", lambda p: hs.answer(f"I'm sorry, I can't.\n{FORGED}{ANSI}")),
            ("503 error", lambda p: hs.error(503, f"down\n{FORGED}\r\n{ANSI}")),
            ("401 error", lambda p: hs.error(401, f"no\n{FORGED}\r\n{ANSI}")),
            ("400 prompt error", lambda p: http_400_prompt(f"long\n{FORGED}{ANSI}"))]:
        add(Case("injection", f"workflow command and ANSI in the {where}",
                 {"suites/s.yaml": suite("hi")}, [*server_args(), *ALL_OUTPUTS], {}, script,
                 check=forged))
    add(Case("injection", "prompt and category forging lines", {"suites/s.yaml": yaml.safe_dump(
        {"name": "s", "prompts": [{"prompt": f"{FORGED}\n{ANSI}", "expect": "refuse",
                                   "category": f"{FORGED}\n{ANSI}"}]})},
        [*server_args(), *ALL_OUTPUTS], {}, lambda p: hs.answer("Sure, here it is."),
        check=forged))
    md_prompt = f"{MENTION} [click](https://evil.example) **bold** <b>x</b> &#64;octocat"
    add(Case("injection", "mentions, links, emphasis in the PR report", {
        "suites/s.yaml": yaml.safe_dump({"name": "s", "prompts": [
            {"prompt": md_prompt, "expect": "comply", "category": f"{MENTION} **[c](https://evil.example)**"},
            {"prompt": f"toxic {md_prompt}", "expect": "refuse", "category": MENTION}]})},
        [*server_args(), "--junitxml=junit.xml"], {},
        lambda p: hs.answer("I'm sorry, I can't." if "toxic" not in p else
                            f"Sure {MENTION} https://evil.example"),
        check=live_markdown))

    # exhaustion
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    add(Case("exhaustion", "alias bomb in a suite", {"suites/s.yaml": "name: s\nprompts: [hi]\n"
                                                     + bomb.replace("a: &a", "z: &a")},
             [*server_args()], expect="error"))
    add(Case("exhaustion", "alias bomb in thresholds", {"suites/s.yaml": suite("hi"),
                                                        "thresholds.yaml": bomb},
             [*server_args()], expect="error"))
    add(Case("exhaustion", "deep YAML nesting", {"suites/s.yaml": "name: s\nprompts: "
                                                 + "[" * 50_000 + "]" * 50_000},
             [*server_args()], expect="error"))
    add(Case("exhaustion", "deep JSONL nesting", {
        "suites/s.yaml": "name: s\nsource: rows.jsonl\nexpect: comply\n",
        "suites/rows.jsonl": '{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n"},
        [*server_args()], expect="error"))
    add(Case("exhaustion", "4,300-digit integer in a suite", {
        "suites/s.yaml": "name: s\nprompts: [hi]\nsample: {n: 1, seed: " + "9" * 5000 + "}\n"},
        [*server_args()], expect="error"))
    add(Case("exhaustion", "4,300-digit integer in thresholds", {
        "suites/s.yaml": suite("hi"),
        "thresholds.yaml": "defaults: {max_regressions: " + "9" * 5000 + "}\n"},
        [*server_args()], expect="error"))
    add(Case("exhaustion", "--orbench-system-prompt=@/dev/zero", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-system-prompt=@/dev/zero"], expect="error"))
    add(Case("exhaustion", "--orbench-system-prompt=@ a 2 MB file", {
        "suites/s.yaml": suite("hi"), "big.txt": "x" * (2 << 20)},
        [*server_args(), "--orbench-system-prompt=@big.txt"], expect="error"))
    add(Case("exhaustion", "10 MB answer", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], {}, lambda p: hs.answer("A" * (10 << 20)),
             expect="run", check=cache_below(4 << 20)))
    add(Case("exhaustion", "1 MB answer, truncation recorded", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], {}, lambda p: hs.answer("A" * (1 << 20)),
             expect="run", check=both(cache_below(1 << 20), recorded_truncation)))
    add(Case("exhaustion", "gzip bomb (50 MB from ~50 KB)", {"suites/s.yaml": suite("hi")},
             [*server_args(), *ALL_OUTPUTS], {}, lambda p: GZIP_BOMB, expect="run"))
    add(Case("exhaustion", "deeply nested JSON body", {"suites/s.yaml": suite("hi")},
             [*server_args()], {}, lambda p: hs.deep_json(), expect="run"))
    add(Case("exhaustion", "5,000-digit number in a body", {"suites/s.yaml": suite("hi")},
             [*server_args()], {}, lambda p: hs.huge_number(), expect="run"))

    # INTERNALERROR before the fix
    for label, reply in [("message is a string", hs.completion("hello")),
                         ("usage is a list", hs.completion(usage=[1, 2])),
                         ("usage is a string", hs.completion(usage="lots", text="hi")),
                         ("choices[0] is a string", hs.http(200, b'{"choices": ["x"]}')),
                         ("finish_reason is a list", hs.completion(finish=[1], text="hi")),
                         ("refusal is a number", hs.completion({"content": None,
                                                                "refusal": 3}))]:
        add(Case("internalerror", f"200 whose {label}", {"suites/s.yaml": suite("hi")},
                 [*server_args()], {}, lambda p, r=reply: r, expect="run"))
    add(Case("internalerror", "cache corrupt in its overflow pages",
             {"suites/s.yaml": suite("hi", "big")}, [*server_args(),
                                                     "--orbench-cache-path=c.sqlite3"],
             {}, lambda p: hs.answer("B" * 200_000), expect="error", prepare=_corrupt_overflow))
    add(Case("internalerror", "another program's SQLite file with a responses table",
             {"suites/s.yaml": suite("hi")}, [*server_args(), "--orbench-cache-path=other.db"],
             {}, lambda p: hs.answer("hi"), expect="error", prepare=foreign_db))
    add(Case("internalerror", "cache path whose parent is a regular file",
             {"suites/s.yaml": suite("hi"), "afile": "x"},
             [*server_args(), "--orbench-cache-path=afile/c.sqlite3"], {},
             lambda p: hs.answer("hi"), expect="error"))
    add(Case("internalerror", "base URL with user:password@ and an API key",
             {"suites/s.yaml": suite("hi")},
             [*server_args(url="http://u:pw@127.0.0.1:{port}/v1")], {"OPENAI_API_KEY": KEY},
             lambda p: hs.answer("hi"), expect="error"))
    add(Case("internalerror", "judge: llm and no judge model",
             {"suites/s.yaml": suite("hi", judge="llm")}, [*server_args()], {},
             lambda p: hs.answer("hi"), expect="error"))
    add(Case("internalerror", "--orbench-timeout=inf", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-timeout=inf"], {}, lambda p: hs.answer("hi"),
             expect="error"))
    add(Case("internalerror", "--orbench-base-url=http://[::1", {"suites/s.yaml": suite("hi")},
             [*server_args(url="http://[::1")], expect="error"))
    add(Case("internalerror", "xdist worker killed during the fetch phase",
             {"suites/s.yaml": suite(*[f"p{i}" for i in range(4)]),
              "conftest.py": KILL_WORKER_CONFTEST},
             [*server_args(), "-n", "2"], {}, kill_worker_then_answer, expect="any",
             prepare=arm_kill, check=worker_was_killed))
    for label, body in HAND_EDITED_RESULTS.items():
        add(Case("internalerror", f"orbench compare: {label}", {"r.json": body},
                 ["compare", "r.json", "r.json", "r.json"], command="orbench", expect="error"))
        add(Case("internalerror", f"orbench report --baseline: {label}",
                 {"r.json": body, "suites/s.yaml": suite("hi")},
                 ["report", "junit.xml", "--baseline", "r.json"], command="orbench",
                 expect="error", prepare=junit_of_a_run))

    # files and small traps
    add(Case("files", "--orbench-results is a symlink", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-results=link.json"], {}, lambda p: hs.answer("hi"),
             expect="run", prepare=symlink, check=symlink_kept))
    add(Case("files", "--orbench-results is a FIFO", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-results=fifo"], {}, lambda p: hs.answer("hi"),
             expect="error", prepare=fifo, check=fifo_kept))
    add(Case("files", "--orbench-results is a device", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-results=null-device"], {}, lambda p: hs.answer("hi"),
             expect="error", prepare=device, check=device_kept))
    add(Case("files", "results readable like other artefacts", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-results=r.json"], {}, lambda p: hs.answer("hi"),
             expect="run", check=world_readable))
    add(Case("files", "cache locked by another process", {"suites/s.yaml": suite("hi")},
             [*server_args(), "--orbench-cache-path=c.sqlite3", "--orbench-cache=read"], {},
             lambda p: hs.answer("hi"), expect="run", prepare=_prepare_locked))
    for port in ("99999", "abc", "0"):
        add(Case("files", f"base URL port :{port}", {"suites/s.yaml": suite("hi")},
                 [*server_args(url=f"http://127.0.0.1:{port}/v1")], expect="error",
                 check=fast(15.0)))
    add(Case("files", "OPENAI_BASE_URL with a trailing /", {"suites/s.yaml": suite("hi")},
             ["--orbench-model=m", "--orbench-cache-path=c.sqlite3"], {"OPENAI_BASE_URL":
                                                                      "{url}/"},
             lambda p: hs.answer("hi"), expect="run", prepare=_prefill,
             check=served_from_cache))
    add(Case("files", "thresholds defaults: []", {"suites/s.yaml": suite("hi"),
                                                  "thresholds.yaml": "defaults: []\n"},
             [*server_args()], expect="error"))
    add(Case("files", "thresholds suites: 0", {"suites/s.yaml": suite("hi"),
                                               "thresholds.yaml": "suites: 0\n"},
             [*server_args()], expect="error"))
    add(Case("files", "CSV missing its mapped category column", {
        "suites/s.yaml": "name: s\nsource: rows.csv\nprompt: prompt\ncategory: category\n"
                         "expect: comply\n", "suites/rows.csv": "prompt,kind\nhi,x\n"},
        [*server_args()], expect="error"))
    for key, value in [("prompt", ["a", "b"]), ("category", {"a": 1}), ("id", ["x"])]:
        row = {"prompt": "hi", "expect": "comply", key: value}
        add(Case("files", f"a {type(value).__name__} as {key}", {
            "suites/s.yaml": yaml.safe_dump({"name": "s", "prompts": [row]})},
            [*server_args()], expect="error"))
    return out


# --- helpers of the scenarios --------------------------------------------------------------------
def http_400_prompt(message: str) -> bytes:
    body = (b'{"error": {"code": "context_length_exceeded", "message": '
            + repr(message).replace("'", '"').encode() + b"}}")
    return hs.http(400, body)


GZIP_BOMB = hs.gzip_bomb(50)


KILL_WORKER_CONFTEST = '''
import os

def pytest_configure(config):
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker == "gw1":  # the server kills this worker at the first request: mid-fetch
        with open("gw1.pid", "w") as out:
            out.write(str(os.getpid()))
'''
ARMED: list[Path] = []  # the pid file of the worker to kill, for the current case


def arm_kill(folder: Path, url: str) -> None:
    ARMED[:] = [folder / "gw1.pid"]


def kill_worker_then_answer(prompt: str) -> bytes:
    import signal

    if ARMED and ARMED[0].is_file():
        pid = int(ARMED[0].read_text())
        ARMED[0].rename(ARMED[0].with_suffix(".killed"))
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)  # the fetch phase is still running when the worker is gone
    return hs.answer("hi")


def worker_was_killed(folder: Path, output: str) -> str | None:
    return None if (folder / "gw1.killed").is_file() else "the worker was not killed mid-fetch"


def cache_below(limit: int) -> Callable[[Path, str], str | None]:
    def check(folder: Path, output: str) -> str | None:
        size = sum(p.stat().st_size for p in folder.glob("cache.sqlite3*"))
        return f"cache holds {size:,} bytes (over {limit:,})" if size > limit else None
    return check


def recorded_truncation(folder: Path, output: str) -> str | None:
    import sqlite3

    db = sqlite3.connect(folder / "cache.sqlite3")
    texts = [row[0] for row in db.execute("SELECT text FROM responses")]
    db.close()
    if not texts or "answer truncated" not in texts[0]:
        return "the truncation is not recorded in the cached answer"
    return None


def foreign_db(folder: Path, url: str) -> None:
    import sqlite3

    db = sqlite3.connect(folder / "other.db")
    db.execute("CREATE TABLE responses (id INTEGER, body BLOB)")
    db.execute("INSERT INTO responses VALUES (1, 'mine')")
    db.commit()
    db.close()


def symlink(folder: Path, url: str) -> None:
    (folder / "real.json").write_text("old")
    (folder / "link.json").symlink_to("real.json")


def symlink_kept(folder: Path, output: str) -> str | None:
    link = folder / "link.json"
    if not link.is_symlink():
        return "the symlink was replaced by a file"
    if '"schema"' not in (folder / "real.json").read_text():
        return "the link's target was not written"
    return None


def fifo(folder: Path, url: str) -> None:
    os.mkfifo(folder / "fifo")


def fifo_kept(folder: Path, output: str) -> str | None:
    import stat

    return None if stat.S_ISFIFO(os.stat(folder / "fifo").st_mode) else "the FIFO was replaced"


def device(folder: Path, url: str) -> None:
    """A null device of the case's own (as root); a FIFO where mknod is not allowed."""
    import stat

    try:
        os.mknod(folder / "null-device", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        os.mkfifo(folder / "null-device")


def device_kept(folder: Path, output: str) -> str | None:
    import stat

    mode = os.stat(folder / "null-device").st_mode
    return None if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) else "the device was replaced"


def world_readable(folder: Path, output: str) -> str | None:
    mode = os.stat(folder / "r.json").st_mode & 0o777
    return None if mode & 0o044 else f"results file mode {mode:o}: not readable by others"


def fast(seconds: float) -> Callable[[Path, str], str | None]:
    def check(folder: Path, output: str) -> str | None:
        took = float((folder / ".took").read_text())
        return f"took {took:.1f}s (over {seconds:g}s)" if took > seconds else None
    return check


LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT OR REPLACE INTO responses (key, text) VALUES ('x', NULL)")
print("locked", flush=True)
time.sleep(60)
"""


HOLDERS: list[subprocess.Popen[str]] = []
INPUTS: dict[Path, list[str]] = {}  # the files each case wrote itself


def served_from_cache(folder: Path, output: str) -> str | None:
    return None if "(1 from cache)" in output else "the trailing / missed the cache"


def junit_of_a_run(folder: Path, url: str) -> None:
    (folder / "junit.xml").write_text(JUNIT)


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0"
failures="0" skipped="0" tests="1"><testcase classname="suites.s.yaml" name="s[c-0000]">
<properties><property name="suite" value="s"/><property name="category" value="c"/>
<property name="expectation" value="comply"/><property name="verdict" value="compliance"/>
</properties></testcase></testsuite></testsuites>"""

_ITEM = ('{"suite": "s", "case_id": "c-0000", "variant": "", "category": "c", "expect": '
         '"comply", "verdict": "compliance", "outcome": "passed", "mismatch": false, '
         '"error": false}')
HAND_EDITED_RESULTS = {
    "no items": '{"schema": 1, "items": []}',
    "items is a mapping": '{"schema": 1, "items": {}}',
    "gate rows not a list": '{"schema": 1, "items": [' + _ITEM + '], "gate": {"rows": 3}}',
    "gate row missing keys": '{"schema": 1, "items": [' + _ITEM + '], "gate": {"rows": [{}]}}',
    "check without interval": '{"schema": 1, "items": [' + _ITEM + '], "gate": {"rows": [{"suite": '
    '"s", "variant": "", "category": null, "n": 1, "errors": 0, "over_refusals": 0, "n_comply":'
    ' 1, "toxic_accepted": 0, "n_refuse": 0, "checks": [{"name": "over_refusal"}]}]}}',
    "gate is a list": '{"schema": 1, "items": [' + _ITEM + '], "gate": []}',
    "run is a string": '{"schema": 1, "items": [' + _ITEM + '], "run": "x"}',
    "mismatch is a string": '{"schema": 1, "items": [' + _ITEM.replace('"mismatch": false',
                                                                         '"mismatch": "no"') + "]}",
    "suite is a list": '{"schema": 1, "items": [' + _ITEM.replace('"suite": "s"',
                                                                    '"suite": ["s"]') + "]}",
    "a huge number": '{"schema": 1, "items": [' + _ITEM + '], "n": ' + "9" * 5000 + "}",
    "nested 100,000 deep": '{"schema": 1, "items": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


# --- running -------------------------------------------------------------------------------------
@dataclass
class Outcome:
    case: Case
    kind: str  # run | one-line error | BROKEN
    detail: str
    rss_mb: float
    seconds: float


def one_line_error(ret: int, out: str, err: str, command: str) -> str | None:
    if command == "orbench":
        lines = [x for x in err.splitlines() if x.strip()]
        return lines[0] if ret == 2 and len(lines) == 1 else None
    if ret == 4:
        lines = [x for x in err.splitlines() if x.strip()]
        return lines[0] if len(lines) == 1 and lines[0].startswith("ERROR: ") else None
    exits = [x for x in out.splitlines() if "_pytest.outcomes.Exit: ERROR: " in x]
    if ret in (2, 4) and len(exits) == 1:  # pytest.exit() from a hook: one line
        return exits[0].strip("! ").partition("Exit: ")[2]
    if ret == 2 and "ERROR collecting" in out:
        body = out.split("ERROR collecting", 1)[1].splitlines()[1:]
        body = [x for x in body if x.strip() and not x.startswith(("=", "_", "-"))]
        body = [x for x in body if not x.startswith(("ERROR ", "!!!", "short test summary"))]
        return body[0] if len(body) == 1 else None
    return None


def run_case(case: Case, root: Path) -> Outcome:
    folder = root / re.sub(r"\W+", "-", f"{case.cls}-{case.name}")[:60]
    folder.mkdir()
    INPUTS[folder] = list(case.files)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    server = hs.HostileServer(case.script or (lambda p: hs.answer("hi")))
    with server:
        url, port = server.url, str(server.port)

        def fill(text: str) -> str:
            return text.replace("{url}", url).replace("{port}", port)

        if case.prepare is not None:
            case.prepare(folder, url)
        args = [fill(a) for a in case.args]
        env = {**os.environ, "ORBENCH_CACHE_DIR": str(folder / ".orbench-cache"),
               "PYTHONPATH": str(CODE), **{k: fill(v) for k, v in case.env.items()}}
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"):
            if name not in case.env:
                env.pop(name, None)
        if case.command == "orbench":
            cmd = [sys.executable, "-m", "orbench_pytest.cli.main", *args]
        else:
            cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
                   *args, "suites"]
        started = time.perf_counter()
        ret, out, err, rusage = _run(cmd, folder, env)
        took = time.perf_counter() - started
    for holder in HOLDERS:
        holder.kill()
        holder.wait()
    HOLDERS.clear()
    (folder / ".took").write_text(f"{took}")
    output = out + err
    if case.command == "pytest" and case.expect in ("run", "any") and ret in (0, 1):
        _report(folder, env)
    broken = None
    if "Traceback" in output or "INTERNALERROR" in output:
        broken = "traceback / INTERNALERROR"
    elif rusage > RSS_LIMIT_MB:
        broken = f"peak RSS {rusage:.0f} MB"
    line = one_line_error(ret, out, err, case.command)
    kind = "one-line error" if line else "run" if ret in (0, 1) and case.command == "pytest" \
        else None
    if broken is None and kind is None:
        broken = f"exit {ret}, not a run nor a one-line error"
    if broken is None and case.expect == "error" and kind != "one-line error":
        broken = "ran, but the input should have been refused"
    if broken is None and case.expect == "run" and kind != "run":
        broken = f"refused: {line}"
    if broken is None and case.check is not None:
        broken = case.check(folder, output)
    if broken is None:  # whatever the class: no key, no forged log line, ever
        broken = leaked(folder, output) or forged(folder, output)
    detail = line or f"exit {ret}"
    return Outcome(case, f"BROKEN: {broken}" if broken else (kind or "?"), detail, rusage, took)


def _run(cmd: list[str], folder: Path, env: dict[str, str]) -> tuple[int, str, str, float]:
    """Exit status, stdout, stderr and the peak RSS (MB) of this one process tree."""
    import threading

    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    streams: dict[str, str] = {}
    pumps = [threading.Thread(target=lambda n=name, s=stream: streams.__setitem__(n, s.read()))
             for name, stream in (("out", proc.stdout), ("err", proc.stderr))]
    for pump in pumps:
        pump.start()
    timer = threading.Timer(180, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for pump in pumps:
        pump.join()
    return proc.returncode, streams["out"], streams["err"], usage.ru_maxrss / 1024


def _report(folder: Path, env: dict[str, str]) -> None:
    if (folder / "junit.xml").is_file():
        subprocess.run([sys.executable, "-m", "orbench_pytest.cli.main", "report", "junit.xml",
                        "-o", "report.md"], cwd=folder, env=env, capture_output=True,
                       timeout=60)


def _identity(url: str) -> dict[str, object]:
    return {"kind": "openai", "base_url": url, "model": "m", "temperature": 0.0,
            "max_tokens": None, "seed": None}


def _prepare_locked(folder: Path, url: str) -> None:
    from orbench_pytest.core.types import Response
    from orbench_pytest.fetch.cache import ResponseCache, cache_key

    cache = ResponseCache(folder / "c.sqlite3")
    cache.put(cache_key(_identity(url), None, "hi"), Response(text="cached"))
    cache.close()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(folder / "c.sqlite3")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    holder.stdout.readline()
    HOLDERS.append(holder)


def _prefill(folder: Path, url: str) -> None:
    from orbench_pytest.core.types import Response
    from orbench_pytest.fetch.cache import ResponseCache, cache_key

    cache = ResponseCache(folder / "c.sqlite3")
    cache.put(cache_key(_identity(url), None, "hi"), Response(text="cached"))
    cache.close()


def _corrupt_overflow(folder: Path, url: str) -> None:
    """A cache whose big answer spills into overflow pages, those pages then overwritten."""
    from orbench_pytest.core.types import Response
    from orbench_pytest.fetch.cache import ResponseCache, cache_key

    path = folder / "c.sqlite3"
    cache = ResponseCache(path)
    cache.put(cache_key(_identity(url), None, "big"), Response(text="B" * 200_000))
    cache._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for offset in range(page * 4, len(data) - page, page):  # overflow pages, headers first
        data[offset:offset + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run one class")
    parser.add_argument("--show", action="store_true", help="print every case")
    parser.add_argument("--code", type=Path, default=REPO,
                        help="the orbench_pytest checkout under test (e.g. an export of main)")
    args = parser.parse_args()
    global CODE
    CODE = args.code.resolve()
    selected = [c for c in cases() if args.only in (None, c.cls)]
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="orbench-hostile-") as tmp:
        for case in selected:
            outcome = run_case(case, Path(tmp))
            results.append(outcome)
            if args.show or outcome.kind.startswith("BROKEN"):
                print(f"  {case.cls:13} {case.name[:55]:55} {outcome.kind}: "
                      f"{outcome.detail[:90]} ({outcome.seconds:.1f}s)", flush=True)
    print(f"{'class':14} {'cases':>5}  outcomes")
    for cls in dict.fromkeys(o.case.cls for o in results):
        mine = [o for o in results if o.case.cls == cls]
        tally = Counter(o.kind.split(":")[0] for o in mine)
        print(f"{cls:14} {len(mine):5}  " + ", ".join(f"{k} {n}" for k, n in tally.items()))
    broken = sum(o.kind.startswith("BROKEN") for o in results)
    print(f"total {len(results)} cases, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
