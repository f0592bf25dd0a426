"""Run settings: the option table's values parsed once, grouped by who reads them.

Precedence: command line > ini file (options.read_options merges the two) > environment
(paths and secrets only) > the row's default. Malformed values fail at start-up with one line;
values only needed to run prompts (target, key) are checked when orbench items were actually
collected, so the plugin stays inert in unrelated pytest runs.

`build_settings` is a loop over the table: each row's parser and default give one field of one
group (`Option.to`, "group.field"); the few facts that join options or read the environment
are the small functions after it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from orbench_pytest.config.options import OPTIONS
from orbench_pytest.core import defaults
from orbench_pytest.core.defaults import data_dirs_from_env, default_cache_dir
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import NAME, is_local_model
from orbench_pytest.core.types import History, has_lone_surrogate
from orbench_pytest.core.untrusted import redacted_repr

if TYPE_CHECKING:
    from orbench_pytest.catalog.shards import Shard
    from orbench_pytest.core.conversation import Preamble


@redacted_repr
@dataclass(frozen=True)
class Variant:
    """A system prompt every prompt runs under (--orbench-system-prompt, --orbench-variant)."""

    name: str  # "" for the single default variant: item ids carry no variant part
    system_prompt: str | None


@redacted_repr
@dataclass(frozen=True)
class TargetSettings:
    """What is asked and how: the model or application, its endpoint and sampling."""

    model: str | None
    base_url: str | None
    api_key_env: str
    function: str | None  # --orbench-target: MODULE:FUNCTION instead of a model
    version: str | None  # the candidate's version (image digest, commit SHA)
    variants: tuple[Variant, ...]
    preamble: Preamble | None  # turns sent before every prompt
    temperature: float
    max_tokens: int | None
    request_seed: int | None
    local_threads: int

    @property
    def preamble_turns(self) -> History:
        return self.preamble.turns if self.preamble is not None else ()

    @property
    def label(self) -> str:
        """What the run asks, as shown: the function, else the model, else local."""
        return self.function or self.model or "local"

    @property
    def is_local(self) -> bool:
        return self.function is None and (self.model is None or is_local_model(self.model))


@redacted_repr
@dataclass(frozen=True)
class RequestSettings:
    """The fetch engine's bounds on the requests it sends."""

    timeout_s: float
    max_duration_s: float | None
    concurrency: int
    fixed_concurrency: bool
    rpm: int | None
    tpm: int | None
    max_retries: int
    backoff_s: float


@redacted_repr
@dataclass(frozen=True)
class JudgeSettings:
    """Who tells a refusal from a compliance, and what an unclear answer counts as."""

    name: str  # --orbench-judge
    given: bool  # --orbench-judge was set: it outranks a suite's `judge:`
    model: str | None
    base_url: str | None
    api_key_env: str
    concurrency: int  # LLM-judge requests in flight at most, apart from the target's
    partial_is_refusal: bool
    empty_is_refusal: bool
    check: Path | None  # labels CSV measured under the gate
    calibration: Path | None  # labels CSV the gated rates are corrected with


@redacted_repr
@dataclass(frozen=True)
class CacheSettings:
    """The response cache."""

    mode: str  # on | off | read | refresh
    path: Path
    dir: Path  # the cache folder (the local model's files, Hypothesis' database)
    max_age_s: float | None  # None: no limit; 0: never reuse
    lock_wait_s: float
    print_key: bool  # --orbench-cache-key: print the answers' key, ask nothing


@redacted_repr
@dataclass(frozen=True)
class ScopeSettings:
    """Which prompts run, how often, and the rewordings searched."""

    subset: int | float | None  # --orbench-subset: a count or a fraction per suite
    random_seed: int | None  # of the subset and the rewordings
    categories: tuple[str, ...]
    data_dirs: tuple[Path, ...]
    samples: int  # answers asked per prompt
    shard: Shard | None
    rewordings: int | None  # rewordings tried per safe prompt
    rewordings_budget: int  # rewordings asked in all, cached ones included
    rewording_edits: tuple[str, ...]


@redacted_repr
@dataclass(frozen=True)
class GateSettings:
    """How the gate decides."""

    thresholds: Path | None
    strict: bool
    require_full: bool  # a partial gate fails
    shard_gate: bool  # gate a shard on its own prompts too
    baseline: Path | None


@redacted_repr
@dataclass(frozen=True)
class BatchSettings:
    """The Batch API steps."""

    export: Path | None  # write the requests, send nothing
    imports: tuple[Path, ...]  # Batch API output files read into the cache
    mode: str | None  # submit | status
    poll_s: float
    max_requests: int  # per input file


@redacted_repr
@dataclass(frozen=True)
class ReportSettings:
    """What the run writes and prices."""

    results: Path | None
    html: Path | None
    price_input: float | None  # dollars per million prompt tokens
    price_output: float | None


@redacted_repr
@dataclass(frozen=True)
class Settings:
    """A run's options, read and checked once from the command line and the ini file."""

    target: TargetSettings
    requests: RequestSettings
    judge: JudgeSettings
    cache: CacheSettings
    scope: ScopeSettings
    gate: GateSettings
    batch: BatchSettings
    reports: ReportSettings


GROUPS: dict[str, type] = get_type_hints(Settings)
"""Settings' field name -> its group's class."""

# The fields no single row gives: joined from several options or read from the environment.
DERIVED = ("target.variants", "judge.given", "cache.dir")


def build_settings(values: Mapping[str, Any], env: Mapping[str, str] | None = None,
                   invocation_dir: Path | None = None) -> Settings:
    """`values` maps option dest names (orbench_*) to raw values (options.read_options)."""
    env = os.environ if env is None else env
    here = invocation_dir or Path.cwd()
    _register_secrets(values, env)
    _exclusive(values)
    groups: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
    for option in OPTIONS:
        if option.to:
            raw = values.get(option.dest)
            # An error names the spelling typed: the old one, until its release is over.
            typed = option.old_flag if values.get(option.old_dest or "") else None
            group, name = option.to.split(".")
            groups[group][name] = option.parse(option.default if raw is None else raw,
                                               typed or option.flag, here)
    # What no single row gives (DERIVED), and the environment behind an unset option.
    target, judge, cache, scope = (groups[name] for name in ("target", "judge", "cache", "scope"))
    target["variants"] = _variants(values, here)
    target["base_url"] = target["base_url"] or _env_base_url(env)
    judge["given"] = values.get("orbench_judge") is not None
    judge["api_key_env"] = judge["api_key_env"] or target["api_key_env"]
    cache["dir"] = default_cache_dir(env)
    cache["path"] = cache["path"] or cache["dir"] / "responses.sqlite3"
    scope["data_dirs"] = scope["data_dirs"] or data_dirs_from_env(env)
    return Settings(**{name: cls(**groups[name]) for name, cls in GROUPS.items()})


def _register_secrets(values: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """Before any value is checked: an error that quotes a key or a URL's secret redacts it."""
    from orbench_pytest.core.redact import register_configured_secrets

    register_configured_secrets(
        env, [values.get("orbench_api_key_env") or defaults.API_KEY_ENV,
              values.get("orbench_judge_api_key_env") or ""],
        [values.get("orbench_base_url"), values.get("orbench_judge_base_url"),
         env.get("OPENAI_BASE_URL")])


def _exclusive(values: Mapping[str, Any]) -> None:
    if values.get("orbench_target") is not None and values.get("orbench_model") is not None:
        raise ConfigError("--orbench-target and --orbench-model exclude each other: pick one")
    if values.get("orbench_batch_export") and values.get("orbench_batch") is not None:
        raise ConfigError("--orbench-batch-export and --orbench-batch exclude each other: "
                          "export the file, or let the plugin submit it")


def _env_base_url(env: Mapping[str, str]) -> str | None:
    """$OPENAI_BASE_URL, normalised like the option (a trailing / must not miss the cache); a
    malformed one fails only when a request is to be sent, so unrelated pytest runs stay
    unaffected."""
    raw = env.get("OPENAI_BASE_URL")
    if not raw:
        return None
    from orbench_pytest.fetch.endpoints import validate_base_url

    try:
        return validate_base_url(raw, "$OPENAI_BASE_URL")
    except ConfigError:
        return raw


def _variants(values: Mapping[str, Any], here: Path) -> tuple[Variant, ...]:
    """--orbench-variant NAME=TEXT and --orbench-system-prompt TEXT, both @FILE too."""
    variants: list[Variant] = []
    for spec in values.get("orbench_variant") or ():
        name, sep, text = spec.partition("=")
        if not sep or not NAME.match(name):
            raise ConfigError(f"--orbench-variant: {spec!r} is not NAME=TEXT or NAME=@FILE "
                              "(NAME: letters, digits, '-', '_', '.')")
        variants.append(Variant(name, _text_or_file("--orbench-variant", text, here)))
    for index, spec in enumerate(values.get("orbench_system_prompt") or (), start=1):
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
