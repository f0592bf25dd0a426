"""Every `--orbench-*` option and its ini twin, defined once, and the one reader of both.

The command line overrides the ini file (`[tool.pytest.ini_options]`, pytest.ini, tox.ini).
Relative paths in the ini file are relative to that file's folder; on the command line, to the
folder pytest was started in. Free of pytest: the plugin hands in its parser and getters.
Every pytest start imports this table (plugin/hooks.py), so it stays cheap: no dataclasses, no
module beyond the standard library's already loaded by pytest, `defaults` and `parsers`.

A row is the whole of an option: its flag and ini twin, help, the Settings field it gives
(`to`), its parser and its default; settings.build_settings is a loop over the rows, and
scripts/docs_options.py writes docs/options.md from them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from orbench_pytest.config import parsers
from orbench_pytest.config.parsers import Parser
from orbench_pytest.core import defaults

Kind = Literal["value", "flag", "list", "text_list"]
# How a kind is declared to pytest's ini parser: "args" splits on whitespace (shell quoting),
# "linelist" keeps each line whole (system prompts hold spaces).
_INI_TYPES: dict[Kind, str] = {"value": "string", "flag": "bool", "list": "args",
                               "text_list": "linelist"}
PathKind = Literal["", "path", "suite", "at_file", "variant_file"]


class Option(NamedTuple):  # a NamedTuple: a frozen dataclass costs every pytest start ~1 ms
    flag: str  # --orbench-model
    help: str  # "{default}" in it shows the row's default
    metavar: str | None = None
    kind: Kind = "value"
    path: PathKind = ""  # how a relative value from the ini file is anchored to its folder
    ini_name: str | None = None  # default: the flag's name with underscores
    # One invocation's action (an export, a shard of a CI matrix): no ini twin, which would
    # make every run do it.
    command_line_only: bool = False
    # The option's spelling before a rename, still read (on the command line and as its ini
    # twin) for one release, with a warning that names the new one.
    old_flag: str | None = None
    # The Settings field the value goes to, "group.field" (settings.py); "" for the options
    # a cross-option function there reads (the variants).
    to: str = ""
    parse: Parser = parsers.text  # raw value (or the default) -> the field's value
    # What the option is when neither the command line nor the ini file sets it: a raw value
    # as a user would type it, parsed like one (None: unset).
    default: Any = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def ini(self) -> str:
        return self.ini_name or self.dest

    @property
    def old_dest(self) -> str | None:
        return self.old_flag.removeprefix("--").replace("-", "_") if self.old_flag else None

    @property
    def text(self) -> str:
        """The help, its default shown."""
        return self.help.replace("{default}", shown_default(self.default))


def shown_default(default: Any) -> str:
    """As the help shows it, and as a user would type it (120, not 120.0)."""
    return f"{default:g}" if isinstance(default, float) else str(default)


# Help text style: capitalised, a single phrase without a final period.
OPTIONS: tuple[Option, ...] = (
    Option("--orbench-suite", "Run this suite: a ready suite's name (smoke, smoke-chat, "
           "or-bench-80k, or-bench-hard-1k, or-bench-toxic, xstest, coconot-contrast, "
           "coconot-unsafe; orbench suites lists them) or a suite file's path; repeatable",
           "NAME|PATH", "list", "suite", ini_name="orbench_suites"),
    Option("--orbench-model", "Model to test: a served model name, or local / local:qwen / "
           "local:smollm2 for the embedded model (no default; with only a base URL, the one "
           "model it serves)", "NAME", to="target.model", parse=parsers.model_name),
    Option("--orbench-base-url", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
           f"(default: $OPENAI_BASE_URL or {defaults.OPENAI_URL})", "URL",
           to="target.base_url", parse=parsers.url),
    Option("--orbench-api-key-env", "Environment variable holding the API key "
           "(default: {default})", "VAR", to="target.api_key_env", parse=parsers.env_name,
           default=defaults.API_KEY_ENV),
    Option("--orbench-target", "Test your application instead of a bare model: fn(prompt, "
           "system_prompt) -> str or {'text', 'finish_reason'}, sync or async; with a "
           "`messages` parameter it is also given the whole conversation", "MODULE:FUNCTION",
           to="target.function"),
    Option("--orbench-target-version", "Version of the candidate (image digest, deployment id, "
           "commit SHA): cached answers of another version are not reused", "VERSION",
           to="target.version", parse=parsers.version),
    Option("--orbench-system-prompt", "System prompt; repeat it to compare variants",
           "TEXT|@FILE", "text_list", "at_file"),
    Option("--orbench-variant", "A named system-prompt variant; every prompt runs once per "
           "variant", "NAME=TEXT|@FILE", "text_list", "variant_file"),
    Option("--orbench-preamble", "A conversation sent before every prompt of the run: a YAML "
           "list of {role, content} turns (system, user, assistant)", "FILE", path="path",
           to="target.preamble", parse=parsers.preamble),
    Option("--orbench-temperature", "Sampling temperature (default: {default})", "T",
           to="target.temperature", parse=parsers.number(0.0, 2.0),
           default=defaults.TEMPERATURE),
    Option("--orbench-max-tokens", "Maximum tokens per answer (default: the server's; "
           f"{defaults.LOCAL_MAX_TOKENS} for local)", "N", to="target.max_tokens",
           parse=parsers.whole()),
    Option("--orbench-request-seed", "Seed sent with each request, for servers that honour it",
           "N", to="target.request_seed", parse=parsers.whole(low=0)),
    Option("--orbench-timeout", "Timeout of one request (default: {default})", "SECONDS",
           to="requests.timeout_s", parse=parsers.number(0.001), default=defaults.TIMEOUT_S),
    Option("--orbench-thresholds", "Gate file (default: thresholds.yaml in the rootdir, else "
           "built-in defaults)", "PATH", path="path", to="gate.thresholds",
           parse=parsers.existing_file),
    Option("--orbench-strict", "Fail every mismatch, whatever the thresholds", kind="flag",
           to="gate.strict", parse=parsers.flag),
    Option("--orbench-judge", f"Refusal judge: {', '.join(defaults.JUDGE_NAMES)} "
           "(default: {default})", "NAME", to="judge.name",
           parse=parsers.choice(*defaults.JUDGE_NAMES, blank_is_first=True),
           default=defaults.JUDGE_NAMES[0]),
    Option("--orbench-judge-model", "Model of the llm / hybrid judge", "NAME",
           to="judge.model"),
    Option("--orbench-judge-base-url", "Endpoint of the judge model (default: the target's)",
           "URL", to="judge.base_url", parse=parsers.url),
    Option("--orbench-judge-api-key-env", "Environment variable holding the judge's API key",
           "VAR", to="judge.api_key_env", parse=parsers.env_name),
    Option("--orbench-judge-check", "Labels CSV written by orbench label: print how far the "
           "judge is from it under the gate", "CSV", path="path", to="judge.check",
           parse=parsers.existing_file),
    Option("--orbench-judge-calibration", "Labels CSV written by orbench label: correct each "
           "gated rate for the judge's error measured on it (overrides thresholds' "
           "judge_calibration)", "CSV", path="path", to="judge.calibration",
           parse=parsers.existing_file),
    Option("--orbench-partial", "Count partial refusals as: refusal or compliance "
           "(default: {default})", "refusal|compliance", to="judge.partial_is_refusal",
           parse=parsers.is_choice("refusal", "compliance"),
           default=defaults.PARTIAL_CHOICES[0]),
    Option("--orbench-empty", "Count an empty answer as: error or refusal, for deployments "
           "that answer a blocked prompt with nothing (default: {default})", "error|refusal",
           to="judge.empty_is_refusal", parse=parsers.is_choice("refusal", "error"),
           default=defaults.EMPTY_CHOICES[0]),
    Option("--orbench-concurrency", "Most requests to the target in flight at once (an LLM "
           "judge's: --orbench-judge-concurrency): the concurrency starts "
           f"at {defaults.CONCURRENCY_START} and adapts to the endpoint up to N (default: "
           "{default}; for local at most " f"{defaults.LOCAL_SLOTS}, its server's slots)", "N",
           to="requests.concurrency", parse=parsers.whole(), default=defaults.CONCURRENCY),
    Option("--orbench-fixed-concurrency", "Keep exactly --orbench-concurrency requests in "
           "flight instead of adapting (an LLM judge's limit does not adapt either)",
           kind="flag", to="requests.fixed_concurrency", parse=parsers.flag),
    Option("--orbench-judge-concurrency", "Most LLM-judge requests in flight at once, apart "
           "from the target's: adapts to the judge's endpoint up to N (default: {default}); "
           "the fetch never waits for a verdict", "N", to="judge.concurrency",
           parse=parsers.whole(), default=defaults.JUDGE_CONCURRENCY),
    Option("--orbench-rpm", "Requests per minute limit", "N", to="requests.rpm",
           parse=parsers.whole()),
    Option("--orbench-tpm", "Tokens per minute limit (estimated from prompt length and max "
           "tokens)", "N", to="requests.tpm", parse=parsers.whole()),
    Option("--orbench-price-input", "Price of a million prompt tokens, in dollars: the run "
           "prints its cost (e.g. 0.15)", "USD", to="reports.price_input",
           parse=parsers.number(0.0, defaults.MAX_PRICE_PER_M, " (dollars per million tokens)")),
    Option("--orbench-price-output", "Price of a million completion tokens, in dollars "
           "(e.g. 0.60)", "USD", to="reports.price_output",
           parse=parsers.number(0.0, defaults.MAX_PRICE_PER_M, " (dollars per million tokens)")),
    Option("--orbench-max-retries", "Retries of a failed request: 408, 409, 429, 5xx, resets, "
           "timeouts (default: {default})", "N", to="requests.max_retries",
           parse=parsers.whole(low=0), default=defaults.MAX_RETRIES),
    Option("--orbench-backoff", "First retry delay, doubled each retry, with jitter "
           "(default: {default})", "SECONDS", to="requests.backoff_s",
           parse=parsers.number(0.0), default=defaults.BACKOFF_S),
    Option("--orbench-cache", "Response cache: on, off, read (never write), refresh (ask "
           "again) (default: {default})", "MODE", to="cache.mode",
           parse=parsers.choice(*defaults.CACHE_MODES), default=defaults.CACHE_MODES[0]),
    Option("--orbench-cache-max-age", "Ask again answers cached longer ago than this: e.g. "
           "7d, 12h; 0 = never reuse, none = no limit (default: {default})", "AGE",
           to="cache.max_age_s", parse=parsers.max_age, default=defaults.MAX_AGE),
    Option("--orbench-cache-path", "SQLite cache file (default: "
           "$ORBENCH_CACHE_DIR/responses.sqlite3, ~/.cache/orbench-pytest)", "PATH",
           path="path", to="cache.path", parse=parsers.output_path),
    Option("--orbench-cache-lock-wait", "Wait this long in all for another run's write lock "
           "on the cache, then stop (default: {default})", "SECONDS", to="cache.lock_wait_s",
           parse=parsers.number(0.0), default=defaults.CACHE_LOCK_WAIT_S),
    Option("--orbench-subset", "Run N prompts per suite (or a fraction, or all), stratified by "
           "category; not to be confused with --orbench-samples", "N|FRACTION|all",
           old_flag="--orbench-sample", to="scope.subset", parse=parsers.subset),
    Option("--orbench-random-seed", "Seed of the plugin's own random choices: the prompts of "
           "--orbench-subset, the rewordings of --orbench-rewordings and orbench_ask's "
           "Hypothesis seed (not sent to the model: see --orbench-request-seed)", "N",
           old_flag="--orbench-seed", to="scope.random_seed", parse=parsers.whole(low=0)),
    Option("--orbench-rewordings", "Search for fragile prompts: for each safe prompt the model "
           f"answered, try up to N rewordings (Hypothesis, N at most {defaults.MAX_REWORDINGS:,}"
           "); one the judge surely calls a refusal makes the prompt fragile, gated by "
           "max_fragile_rate", "N", to="scope.rewordings",
           parse=parsers.whole(high=defaults.MAX_REWORDINGS)),
    Option("--orbench-rewordings-budget", "Most rewordings --orbench-rewordings asks in the "
           "whole run, cached ones included (default: {default}; at most "
           f"{defaults.MAX_REWORDINGS_BUDGET:,})", "N", to="scope.rewordings_budget",
           parse=parsers.whole(high=defaults.MAX_REWORDINGS_BUDGET),
           default=defaults.REWORDINGS_BUDGET),
    Option("--orbench-rewording-edits", "Kinds of edit --orbench-rewordings tries, "
           "comma-separated: wording (other words for the same request), persona ('I'm a "
           "nurse.'), purpose ('For a novel I'm writing,') (default: {default})", "KINDS",
           to="scope.rewording_edits", parse=parsers.kinds(*defaults.REWORDING_EDITS),
           default=",".join(defaults.REWORDING_EDITS)),
    Option("--orbench-category", "Run only this category (repeatable)", "NAME", "list",
           to="scope.categories", parse=parsers.texts),
    Option("--orbench-data-dir", "Existing folder of pre-downloaded data files, looked in "
           "first (read, never created); repeatable (default: $ORBENCH_DATA_DIR, a path list)",
           "DIR", "list", "path", to="scope.data_dirs", parse=parsers.folders),
    Option("--orbench-local-threads", "CPU threads of the embedded local model "
           "(default: {default})", "N", to="target.local_threads", parse=parsers.whole(),
           default=defaults.LOCAL_THREADS),
    Option("--orbench-results", "Write every prompt's outcome and the gate as JSON", "PATH",
           path="path", to="reports.results", parse=parsers.output_path),
    Option("--orbench-html", "Write one self-contained HTML page of the run: the gate, the "
           "plot and every prompt with its whole answer (see orbench html)", "PATH",
           path="path", to="reports.html", parse=parsers.output_path),
    Option("--orbench-baseline", "Results file of an earlier run: known mismatches xfail, new "
           "ones fail", "PATH", path="path", to="gate.baseline", parse=parsers.existing_file),
    Option("--orbench-max-duration", "Stop asking after this long; unsent prompts are errors "
           "(default: no limit)", "SECONDS", to="requests.max_duration_s",
           parse=parsers.number(0.001)),
    Option("--orbench-samples", "Ask every prompt N times: a refusal rate per prompt, flaky "
           "prompts listed (default: {default})", "N", to="scope.samples",
           parse=parsers.whole(high=defaults.MAX_SAMPLES), default=defaults.SAMPLES),
    Option("--orbench-cache-key", "Print the key of the answers this run needs and stop, "
           "asking nothing: it changes only when the model, its parameters, a system prompt, "
           "a prompt or the target version does (a CI cache's key)", kind="flag",
           command_line_only=True, to="cache.print_key", parse=parsers.flag),
    Option("--orbench-batch-export", "Write the requests the cache lacks as an OpenAI Batch "
           "API input file (JSONL) and stop: nothing is sent, no gate", "PATH", path="path",
           command_line_only=True, to="batch.export", parse=parsers.output_path),
    Option("--orbench-batch-import", "Read a Batch API output file (OpenAI or vllm run-batch) "
           "into the cache before asking; repeatable", "PATH", "list", "path",
           command_line_only=True, to="batch.imports", parse=parsers.existing_files),
    Option("--orbench-batch", "submit: send the missing requests as one Batch API batch, "
           "wait, import and gate (a rerun resumes the same batch); status: report it",
           "submit|status", command_line_only=True, to="batch.mode",
           parse=parsers.choice(*defaults.BATCH_MODES)),
    Option("--orbench-batch-poll", "Seconds between two looks at a submitted batch "
           "(default: {default})", "SECONDS", to="batch.poll_s", parse=parsers.number(0.0),
           default=defaults.BATCH_POLL_S),
    Option("--orbench-batch-max-requests", "Requests per Batch API input file; more make "
           "several files or batches (default: {default}, OpenAI's limit)", "N",
           to="batch.max_requests", parse=parsers.whole(), default=defaults.BATCH_MAX_REQUESTS),
    Option("--orbench-shard", "Ask only the K-th of N deterministic shards of the selection "
           "(the others are deselected; no gate on a shard alone)", "K/N",
           command_line_only=True, to="scope.shard", parse=parsers.shard),
    Option("--orbench-shard-gate", "Gate a shard run on its own prompts as well", kind="flag",
           command_line_only=True, to="gate.shard_gate", parse=parsers.flag),
    Option("--orbench-require-full", "Fail the gate when prompts of a gated suite were left "
           "out of the run (-k, -m, --lf, --deselect, --orbench-category, a shard)",
           kind="flag", to="gate.require_full", parse=parsers.flag),
)


def add_options(addoption: Callable[..., Any], addini: Callable[..., Any]) -> None:
    """Declare every option twice: on the command line and as an ini key."""
    for option in OPTIONS:
        if option.kind == "flag":
            addoption(option.flag, dest=option.dest, action="store_true", default=None,
                      help=option.text)
        elif option.kind in ("list", "text_list"):
            addoption(option.flag, dest=option.dest, action="append", metavar=option.metavar,
                      help=option.text)
        else:
            addoption(option.flag, dest=option.dest, metavar=option.metavar, help=option.text)
        # A value's default is None, not pytest's "": a key set empty is told from one unset.
        default = {"default": None} if option.kind == "value" else {}
        if not option.command_line_only:
            addini(option.ini, f"{option.text} (the ini twin of {option.flag})",
                   type=_INI_TYPES[option.kind], **default)
        if option.old_flag is not None and option.old_dest is not None:
            addoption(option.old_flag, dest=option.old_dest, metavar=option.metavar,
                      help=f"Deprecated spelling of {option.flag}")
            if not option.command_line_only:
                addini(option.old_dest, f"Deprecated: use {option.ini}",
                       type=_INI_TYPES[option.kind], **default)


def read_options(command_line: Mapping[str, Any], getini: Callable[[str], Any],
                 ini_dir: Path | None, ini_file: Path | None = None) -> dict[str, Any]:
    """The raw value of every option by dest: the command line's, else the ini file's (with
    relative paths anchored to the ini file's folder), else None. An ini value set empty is
    passed on as `--orbench-x=` would be, so the command line's rule for it applies; a value
    the ini twin cannot hold (a boolean that is none, a list for one value) is a ConfigError
    naming the key and `ini_file`. A value given in an option's old spelling is under the old
    dest as well, so that its errors name the spelling typed."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        given = command_line.get(option.dest)
        if given is None and option.old_dest is not None:
            given = _typed_old(values, option.old_dest, command_line.get(option.old_dest))
        if given is not None:
            values[option.dest] = given
            continue
        if option.command_line_only:
            values[option.dest] = None
            continue
        raw = _ini_value(option, option.ini, getini, ini_file)
        if raw in (None, "", [], False) and option.old_dest is not None:
            old = _ini_value(option, option.old_dest, getini, ini_file)
            raw = _typed_old(values, option.old_dest, old or None) or raw
        if raw == "" and option.kind == "value":
            values[option.dest] = ""
        elif raw in (None, "", [], False):
            values[option.dest] = None
        elif ini_dir is not None and option.path:
            values[option.dest] = _anchored(option.path, raw, ini_dir)
        else:
            values[option.dest] = raw
    return values


def _typed_old(values: dict[str, Any], old_dest: str, given: Any) -> Any:
    if given is not None:
        values[old_dest] = given
    return given


BOOLEAN_VALUES = "true/false, 1/0, yes/no, on/off"  # what pytest's bool ini type accepts


def _ini_value(option: Option, key: str, getini: Callable[[str], Any],
               ini_file: Path | None) -> Any:
    # core.errors only on these error paths: every pytest start imports this module.
    where = f"{ini_file or 'the ini file'}: {key}"
    try:
        raw = getini(key)
    except Exception:  # pytest's own error ("invalid truth value 'maybe'") names no key
        if option.kind != "flag":
            raise
        from orbench_pytest.core.errors import ConfigError

        raise ConfigError(f"{where}: not a boolean (allowed: {BOOLEAN_VALUES}; a TOML "
                          "boolean under [tool.pytest])") from None
    if option.kind == "value" and isinstance(raw, list):  # a TOML array for one value
        from orbench_pytest.core.errors import ConfigError

        raise ConfigError(f"{where}: takes one value, not a list; write it as one string "
                          f"({key} = \"...\")")
    return raw


class Deprecated(NamedTuple):
    """A renamed option given in its old spelling, and where the user typed it."""

    message: str
    filename: str  # COMMAND_LINE or the ini file
    lineno: int  # the ini key's line (1-based); 0 on the command line


COMMAND_LINE = "command line"


def deprecated_spellings(command_line: Mapping[str, Any], getini: Callable[[str], Any],
                         ini_file: Path | None = None) -> list[Deprecated]:
    """One warning per renamed option still given in its old spelling, naming the new one and
    located at the user's input: the command line, or the ini file's line."""
    found = []
    for option in OPTIONS:
        if option.old_flag is None or option.old_dest is None:
            continue
        if command_line.get(option.old_dest) is not None:
            found.append(Deprecated(
                f"{option.old_flag} ({COMMAND_LINE}) is deprecated and will be removed in the "
                f"next release: use {option.flag}", COMMAND_LINE, 0))
        if not option.command_line_only and getini(option.old_dest) not in (None, "", [], False):
            name = ini_file.name if ini_file is not None else "the ini file"
            found.append(Deprecated(
                f"{name}: {option.old_dest} is deprecated and will be removed in the next "
                f"release: use {option.ini}", str(ini_file or name),
                _line_of(ini_file, option.old_dest)))
    return found


def _line_of(ini_file: Path | None, key: str) -> int:
    """The line that sets `key` in an ini, cfg or TOML file (1-based), 0 when not found."""
    try:
        lines = ini_file.read_text(encoding="utf-8").splitlines() if ini_file else []
    except (OSError, UnicodeDecodeError):
        return 0
    for number, line in enumerate(lines, start=1):
        name, sep, _ = line.partition("=")
        if not sep:
            name, sep, _ = line.partition(":")
        if sep and name.strip() == key:
            return number
    return 0


def any_given(values: Mapping[str, Any]) -> bool:
    """Whether read_options found any orbench option set, on the command line or in the ini."""
    return any(value is not None for value in values.values())


def _anchored(kind: PathKind, raw: Any, base: Path) -> Any:
    if isinstance(raw, list):
        return [_anchored(kind, item, base) for item in raw]
    text = str(raw)
    if kind == "suite":
        return _path_or_name(text, base)
    if kind == "path":
        return str(base / os.path.expanduser(text))
    if kind == "at_file" and text.startswith("@"):
        return "@" + str(base / text[1:])
    if kind == "variant_file":
        name, sep, value = text.partition("=")
        if sep and value.startswith("@"):
            return f"{name}=@{base / value[1:]}"
    return text


def _path_or_name(text: str, base: Path) -> str:
    """A ready suite's bare name stays a name; a path becomes absolute."""
    from orbench_pytest.catalog.ready import is_suite_name

    if is_suite_name(text):
        return text
    return str(base / os.path.expanduser(text))
