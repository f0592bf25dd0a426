"""Run settings: command-line values validated once, with one-line errors.

Precedence: command line > ini file (options.read_options merges the two) > environment
(paths and secrets only) > defaults. Malformed values
fail at start-up; values only needed to run prompts (target, key) are checked when orbench
items were actually collected, so the plugin stays inert in unrelated pytest runs.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest.catalog.sampling import Shard, parse_shard
from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.conversation import Preamble, load_preamble
from orbench_pytest.core.defaults import data_dirs_from_env, default_cache_dir
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import ENV_NAME, NAME, is_local_model
from orbench_pytest.core.paths import stat_of
from orbench_pytest.core.types import History, has_lone_surrogate
from orbench_pytest.core.untrusted import redacted_repr, terminal_text
from orbench_pytest.fetch.endpoints import validate_base_url
from orbench_pytest.fetch.freshness import DEFAULT_MAX_AGE_S, parse_max_age

CACHE_MODES = ("on", "off", "read", "refresh")
BATCH_MODES = ("submit", "status")
EMPTY_CHOICES = ("error", "refusal")  # what an empty answer counts as; the first is the default
MAX_VERSION_CHARS = 200
MAX_SAMPLES = 100  # --orbench-samples: answers per prompt at most


@redacted_repr
@dataclass(frozen=True)
class Variant:
    """A system prompt every prompt runs under (--orbench-system-prompt, --orbench-variant)."""

    name: str  # "" for the single default variant: item ids carry no variant part
    system_prompt: str | None


@redacted_repr
@dataclass(frozen=True)
class Settings:
    """A run's options, read and checked once from the command line and the ini file."""

    model: str | None
    base_url: str | None
    api_key_env: str
    target: str | None
    variants: tuple[Variant, ...]
    temperature: float
    max_tokens: int | None
    request_seed: int | None
    timeout_s: float
    max_duration_s: float | None
    thresholds: Path | None
    strict: bool
    judge: str
    judge_given: bool  # --orbench-judge was on the command line: it outranks a suite's judge
    judge_model: str | None
    judge_base_url: str | None
    judge_api_key_env: str
    partial_is_refusal: bool
    empty_is_refusal: bool
    concurrency: int
    rpm: int | None
    tpm: int | None
    max_retries: int
    backoff_s: float
    cache_mode: str
    cache_path: Path
    cache_lock_wait_s: float
    cache_dir: Path
    sample: int | float | None
    seed: int | None
    categories: tuple[str, ...]
    data_dirs: tuple[Path, ...]
    local_threads: int
    results: Path | None
    baseline: Path | None
    target_version: str | None = None  # the candidate's version (image digest, commit SHA)
    cache_max_age_s: float | None = DEFAULT_MAX_AGE_S  # None: no limit; 0: never reuse
    extra: dict[str, Any] = field(default_factory=dict)
    samples: int = defaults.SAMPLES  # --orbench-samples: answers asked per prompt
    html: Path | None = None  # --orbench-html: the run's HTML page
    batch_export: Path | None = None  # --orbench-batch-export: write the requests, send nothing
    batch_imports: tuple[Path, ...] = ()  # --orbench-batch-import: Batch API output files
    batch_mode: str | None = None  # --orbench-batch: submit | status
    batch_poll_s: float = defaults.BATCH_POLL_S
    batch_max_requests: int = defaults.BATCH_MAX_REQUESTS  # per input file
    shard: Shard | None = None  # --orbench-shard=K/N
    shard_gate: bool = False  # --orbench-shard-gate: gate a shard on its own prompts too
    require_full: bool = False  # --orbench-require-full: a partial gate fails
    fixed_concurrency: bool = False  # --orbench-fixed-concurrency: no adapting
    judge_concurrency: int = defaults.JUDGE_CONCURRENCY  # --orbench-judge-concurrency
    rewordings: int | None = None  # --orbench-rewordings=N: rewordings tried per safe prompt
    # --orbench-rewordings-budget: rewordings asked in all, cached ones included
    rewordings_budget: int = defaults.REWORDINGS_BUDGET
    # --orbench-rewording-edits: the kinds of edit searched (rewording_edits.KINDS)
    rewording_edits: tuple[str, ...] = defaults.REWORDING_EDITS
    judge_check: Path | None = None  # --orbench-judge-check: labels CSV measured under the gate
    judge_calibration: Path | None = None  # --orbench-judge-calibration: labels CSV
    price_input: float | None = None  # --orbench-price-input: dollars per million tokens
    price_output: float | None = None  # --orbench-price-output
    print_cache_key: bool = False  # --orbench-cache-key: print the answers' key, ask nothing
    preamble: Preamble | None = None  # --orbench-preamble: turns sent before every prompt

    @property
    def preamble_turns(self) -> History:
        return self.preamble.turns if self.preamble is not None else ()

    @property
    def is_local(self) -> bool:
        return self.target is None and (self.model is None or is_local_model(self.model))


def build_settings(values: Mapping[str, Any], env: Mapping[str, str] | None = None,
                   invocation_dir: Path | None = None) -> Settings:
    """`values` maps option dest names (orbench_*) to raw command-line values."""
    env = os.environ if env is None else env
    here = invocation_dir or Path.cwd()

    # Each option read by its dest name; its errors name it as typed (--orbench-max-tokens).
    def get(name: str) -> Any:
        return values.get(f"orbench_{name}")
    def option(name: str) -> str:
        return "--orbench-" + name.replace("_", "-")
    def choice(name: str, allowed: tuple[str, ...]) -> str:
        return _choice(option(name), get(name), allowed)
    def env_name(name: str) -> str | None:
        return _env_name(option(name), get(name))
    def existing(name: str) -> Path | None:
        return _existing_file(option(name), get(name), here)
    def number(name: str, default: float, low: float, high: float | None = None) -> float:
        return _number(option(name), get(name), default, low=low, high=high)
    def optional_number(name: str, low: float) -> float | None:
        return None if get(name) is None else number(name, 0.0, low)
    def price(name: str) -> float | None:
        return None if get(name) is None else _number(
            option(name), get(name), 0.0, low=0.0, high=defaults.MAX_PRICE_PER_M,
            unit=" (dollars per million tokens)")
    def optional_whole(name: str, low: int = 1, high: int | None = None) -> int | None:
        return _whole(option(name), get(name), low=low, high=high)
    def whole(name: str, default: int, low: int = 1, high: int | None = None) -> int:
        value = optional_whole(name, low, high)
        return default if value is None else value

    cache_dir = default_cache_dir(env)
    cache_mode = choice("cache", CACHE_MODES)  # `=`: an error
    judge = _choice("--orbench-judge", get("judge") or None, defaults.JUDGE_NAMES)
    from orbench_pytest.core.redact import register_configured_secrets

    base_url, judge_base_url = get("base_url"), get("judge_base_url")
    register_configured_secrets(
        env, [get("api_key_env") or defaults.API_KEY_ENV, get("judge_api_key_env") or ""],
        [base_url, judge_base_url, env.get("OPENAI_BASE_URL")])
    if base_url is not None:
        base_url = validate_base_url(base_url)
    elif env.get("OPENAI_BASE_URL"):
        # Normalised like the option (a trailing / must not miss the cache); a malformed one
        # fails only when a request is to be sent, so unrelated pytest runs stay unaffected.
        try:
            base_url = validate_base_url(env["OPENAI_BASE_URL"], "$OPENAI_BASE_URL")
        except ConfigError:
            base_url = env["OPENAI_BASE_URL"]
    if judge_base_url is not None:
        judge_base_url = validate_base_url(judge_base_url, "--orbench-judge-base-url")
    sample = get("subset")
    if sample is not None:
        from orbench_pytest.catalog.sampling import parse_sample

        sample = parse_sample(str(sample))
    data_dirs = tuple(_folder("--orbench-data-dir", here / folder)
                      for folder in get("data_dir") or ()) or data_dirs_from_env(env)
    cache_path = get("cache_path")
    model = get("model")
    if model is not None and not model.strip():
        raise ConfigError("--orbench-model: empty; give a model name, or local")
    target = get("target")
    if target is not None and model is not None:
        raise ConfigError("--orbench-target and --orbench-model exclude each other: pick one")
    if get("batch_export") and get("batch") is not None:
        raise ConfigError("--orbench-batch-export and --orbench-batch exclude each other: "
                          "export the file, or let the plugin submit it")
    return Settings(
        model=model,
        base_url=base_url,
        api_key_env=env_name("api_key_env") or defaults.API_KEY_ENV,
        target=target,
        variants=_variants(get("system_prompt") or [], get("variant") or [], here),
        temperature=number("temperature", defaults.TEMPERATURE, 0.0, high=2.0),
        max_tokens=optional_whole("max_tokens"),
        request_seed=optional_whole("request_seed", low=0),
        timeout_s=number("timeout", defaults.TIMEOUT_S, 0.001),
        max_duration_s=optional_number("max_duration", 0.001),
        thresholds=existing("thresholds"),
        strict=bool(get("strict")),
        judge=judge,
        judge_given=get("judge") is not None,
        judge_model=get("judge_model"),
        judge_base_url=judge_base_url,
        judge_api_key_env=(env_name("judge_api_key_env") or get("api_key_env")
                           or defaults.API_KEY_ENV),
        partial_is_refusal=choice("partial", ("refusal", "compliance")) == "refusal",
        empty_is_refusal=choice("empty", EMPTY_CHOICES) == "refusal",
        concurrency=whole("concurrency", defaults.CONCURRENCY),
        fixed_concurrency=bool(get("fixed_concurrency")),
        judge_concurrency=whole("judge_concurrency", defaults.JUDGE_CONCURRENCY),
        rpm=optional_whole("rpm"),
        tpm=optional_whole("tpm"),
        max_retries=whole("max_retries", defaults.MAX_RETRIES, low=0),
        backoff_s=number("backoff", defaults.BACKOFF_S, 0.0),
        price_input=price("price_input"),
        price_output=price("price_output"),
        cache_mode=cache_mode,
        cache_lock_wait_s=number("cache_lock_wait", defaults.CACHE_LOCK_WAIT_S, 0.0),
        cache_path=(here / cache_path) if cache_path else cache_dir / "responses.sqlite3",
        cache_dir=cache_dir,
        sample=sample,
        seed=optional_whole("seed", low=0),
        categories=tuple(get("category") or ()),
        data_dirs=data_dirs,
        local_threads=whole("local_threads", defaults.LOCAL_THREADS),
        results=(here / get("results")) if get("results") else None,
        baseline=existing("baseline"),
        html=(here / get("html")) if get("html") else None,
        samples=whole("samples", defaults.SAMPLES, high=MAX_SAMPLES),
        target_version=check_target_version(get("target_version")),
        cache_max_age_s=parse_max_age(get("cache_max_age")),
        batch_export=(here / get("batch_export")) if get("batch_export") else None,
        batch_imports=tuple(path for raw in get("batch_import") or ()
                            if (path := _existing_file("--orbench-batch-import", raw, here))),
        batch_mode=None if get("batch") is None else choice("batch", BATCH_MODES),
        batch_poll_s=number("batch_poll", defaults.BATCH_POLL_S, 0.0),
        batch_max_requests=whole("batch_max_requests", defaults.BATCH_MAX_REQUESTS),
        shard=parse_shard(get("shard")) if get("shard") is not None else None,
        shard_gate=bool(get("shard_gate")),
        print_cache_key=bool(get("cache_key")),
        require_full=bool(get("require_full")),
        rewordings=optional_whole("rewordings", high=defaults.MAX_REWORDINGS),
        rewordings_budget=whole("rewordings_budget", defaults.REWORDINGS_BUDGET,
                                high=defaults.MAX_REWORDINGS_BUDGET),
        rewording_edits=_kinds(option("rewording_edits"), get("rewording_edits")),
        judge_check=existing("judge_check"),
        judge_calibration=existing("judge_calibration"),
        preamble=(load_preamble(path) if (path := existing("preamble")) is not None
                  else None),
    )


def check_target_version(raw: Any) -> str | None:
    """--orbench-target-version: one printable line, e.g. an image digest or a commit SHA
    (the value is not echoed: it may be anything pasted)."""
    if raw is None:
        return None
    value = str(raw).strip()
    if not value or len(value) > MAX_VERSION_CHARS or not value.isprintable():
        raise ConfigError(f"--orbench-target-version: expects one printable line of 1 to "
                          f"{MAX_VERSION_CHARS} characters (an image digest, a deployment id, "
                          "a commit SHA)")
    return value


def _variants(system_prompts: list[str], named: list[str], here: Path) -> tuple[Variant, ...]:
    variants: list[Variant] = []
    for spec in named:
        name, sep, text = spec.partition("=")
        if not sep or not NAME.match(name):
            raise ConfigError(f"--orbench-variant: {spec!r} is not NAME=TEXT or NAME=@FILE "
                              "(NAME: letters, digits, '-', '_', '.')")
        variants.append(Variant(name, _text_or_file("--orbench-variant", text, here)))
    for index, spec in enumerate(system_prompts, start=1):
        variants.append(Variant(f"sp{index}", _text_or_file("--orbench-system-prompt", spec, here)))
    if len(variants) == 1:
        return (Variant("", variants[0].system_prompt),)
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ConfigError(f"--orbench-variant: names repeat ({', '.join(names)})")
    return tuple(variants) or (Variant("", None),)


def _text_or_file(option: str, spec: str, here: Path) -> str:
    text = spec
    if spec.startswith("@"):
        from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_text

        try:
            text = read_text(here / spec[1:], OPTION_FILE_LIMIT).strip()
        except ConfigError as exc:
            raise ConfigError(f"{option}: {exc}") from None
    if has_lone_surrogate(text):  # a file is strict UTF-8: only the command line gets here
        raise ConfigError(f"{option}: holds bytes that do not decode as text (they arrive as "
                          f"lone surrogates): pass UTF-8 text, or read it from a file with @path")
    return text


def _choice(option: str, raw: Any, allowed: tuple[str, ...]) -> str:
    if raw is None:
        return allowed[0]
    if raw not in allowed:
        raise ConfigError(f"{option}: {raw!r} is not allowed (allowed: {', '.join(allowed)})")
    return str(raw)


def _kinds(option: str, raw: Any) -> tuple[str, ...]:
    """--orbench-rewording-edits: some of defaults.REWORDING_EDITS, comma-separated, in that
    order (the report's order), each once."""
    if raw is None:
        return defaults.REWORDING_EDITS
    given = [part.strip() for part in str(raw).split(",")]
    unknown = [part for part in given if part not in defaults.REWORDING_EDITS]
    if unknown or not any(given):
        raise ConfigError(f"{option}: {terminal_text(repr(raw), 60)} is not a comma-separated "
                          f"list of {', '.join(defaults.REWORDING_EDITS)}")
    return tuple(kind for kind in defaults.REWORDING_EDITS if kind in given)


def _env_name(option: str, raw: Any) -> str | None:
    """The NAME of a variable; never echo the value, which may be a key pasted by mistake."""
    if raw is None:
        return None
    if not ENV_NAME.match(str(raw)):
        raise ConfigError(f"{option}: expects the name of an environment variable (letters, "
                          "digits, '_'), not the key itself; the value is not shown")
    return str(raw)


def _number(option: str, raw: Any, default: float, *, low: float,
            high: float | None = None, unit: str = "") -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value >= low and (high is None or value <= high)):
        bound = (f"between {low:g} and {high:g}" if high is not None
                 else f"at least {low:g} (and finite)")
        raise ConfigError(f"{option}: {raw!r} is not a number {bound}{unit}")
    return value + 0.0  # -0 is 0: one cache key, one way to print it


_WHOLE = re.compile(r"[+-]?[0-9]{1,30}")  # ASCII digits only: no 1_0, no ٣, no 10**99


def _whole(option: str, raw: Any, *, low: int, high: int | None = None) -> int | None:
    if raw is None:
        return None
    text = str(raw).strip()
    bound = f">= {low}" if high is None else f"from {low} to {high:,}"
    value = int(text) if _WHOLE.fullmatch(text) else None
    if value is None or value < low or (high is not None and value > high):
        raise ConfigError(f"{option}: {terminal_text(repr(raw), 60)} is not a whole number "
                          f"{bound}")
    return value


def _folder(option: str, path: Path) -> Path:
    """A folder the run only reads (never creates): one that is not there is a mistake."""
    found = stat_of(path, option)
    if found is None or not stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{option}: {path} is not a folder; give an existing folder of "
                          "pre-downloaded data files (it is read, never created)")
    return path


def _existing_file(option: str, raw: Any, here: Path) -> Path | None:
    if raw is None:
        return None
    path = here / str(raw)
    try:
        found = regular_file(path)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None
    if found is None:
        raise ConfigError(f"{option}: {path} does not exist")
    return path
