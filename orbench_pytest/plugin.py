"""pytest entry point: options, configuration and the suite-file check, nothing more.

Importing it must stay cheap (every pytest start pays for it, also in projects that run no
suite): the run engine, judges, YAML and HTTP clients load only once a suite is collected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .stash import SESSION_KEY
from .types import JUDGE_NAMES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orbench", "orbench-pytest: over-refusal and toxic-acceptance gate")
    add = group.addoption
    # Help text style: capitalised, a single phrase without a final period.
    add("--orbench-model", dest="orbench_model", metavar="NAME",
        help="Model to test: a served model name, or local / local:qwen / local:smollm2 "
             "for the embedded model (default: local)")
    add("--orbench-base-url", dest="orbench_base_url", metavar="URL",
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
             "(default: $OPENAI_BASE_URL or https://api.openai.com/v1)")
    add("--orbench-api-key-env", dest="orbench_api_key_env", metavar="VAR",
        help="Environment variable holding the API key (default: OPENAI_API_KEY)")
    add("--orbench-target", dest="orbench_target", metavar="MODULE:FUNCTION",
        help="Test your application instead of a bare model: fn(prompt, system_prompt) -> "
             "str or {'text', 'finish_reason'}, sync or async")
    add("--orbench-target-version", dest="orbench_target_version", metavar="VERSION",
        help="Version of the candidate (image digest, deployment id, commit SHA): cached "
             "answers of another version are not reused (ini: orbench_target_version)")
    parser.addini("orbench_target_version", "Version of the candidate, as "
                  "--orbench-target-version (the command line wins)", default=None)
    add("--orbench-system-prompt", dest="orbench_system_prompt", action="append",
        metavar="TEXT|@FILE", help="System prompt; repeat it to compare variants")
    add("--orbench-variant", dest="orbench_variant", action="append", metavar="NAME=TEXT|@FILE",
        help="A named system-prompt variant; every prompt runs once per variant")
    add("--orbench-temperature", dest="orbench_temperature", metavar="T",
        help="Sampling temperature (default: 0)")
    add("--orbench-max-tokens", dest="orbench_max_tokens", metavar="N",
        help="Maximum tokens per answer (default: the server's; 128 for local)")
    add("--orbench-request-seed", dest="orbench_request_seed", metavar="N",
        help="Seed sent with each request, for servers that honour it")
    add("--orbench-timeout", dest="orbench_timeout", metavar="SECONDS",
        help="Timeout of one request (default: 120)")
    add("--orbench-max-duration", dest="orbench_max_duration", metavar="SECONDS",
        help="Stop asking after this long; unsent prompts are errors (default: no limit)")
    add("--orbench-thresholds", dest="orbench_thresholds", metavar="PATH",
        help="Gate file (default: thresholds.yaml in the rootdir, else built-in defaults)")
    add("--orbench-strict", dest="orbench_strict", action="store_true",
        help="Fail every mismatch, whatever the thresholds")
    add("--orbench-judge", dest="orbench_judge", metavar="NAME",
        help=f"Refusal judge: {', '.join(JUDGE_NAMES)} (default: keyword)")
    add("--orbench-judge-model", dest="orbench_judge_model", metavar="NAME",
        help="Model of the llm / hybrid judge")
    add("--orbench-judge-base-url", dest="orbench_judge_base_url", metavar="URL",
        help="Endpoint of the judge model (default: the target's)")
    add("--orbench-judge-api-key-env", dest="orbench_judge_api_key_env", metavar="VAR",
        help="Environment variable holding the judge's API key")
    add("--orbench-partial", dest="orbench_partial", metavar="refusal|compliance",
        help="Count partial refusals as: refusal (default) or compliance")
    add("--orbench-empty", dest="orbench_empty", metavar="error|refusal",
        help="Count an empty answer as: error (default) or refusal (for deployments that "
             "answer a blocked prompt with nothing)")
    add("--orbench-concurrency", dest="orbench_concurrency", metavar="N",
        help="Requests in flight at once (default: 16; for local at most its 4 slots)")
    add("--orbench-rpm", dest="orbench_rpm", metavar="N", help="Requests per minute limit")
    add("--orbench-tpm", dest="orbench_tpm", metavar="N",
        help="Tokens per minute limit (estimated from prompt length and max tokens)")
    add("--orbench-max-retries", dest="orbench_max_retries", metavar="N",
        help="Retries of a failed request: 408, 409, 429, 5xx, resets, timeouts (default: 6)")
    add("--orbench-backoff", dest="orbench_backoff", metavar="SECONDS",
        help="First retry delay, doubled each retry, with jitter (default: 0.5)")
    add("--orbench-cache", dest="orbench_cache", metavar="MODE",
        help="Response cache: on (default), off, read (never write), refresh (ask again)")
    add("--orbench-cache-max-age", dest="orbench_cache_max_age", metavar="AGE",
        help="Ask again answers cached longer ago than this: e.g. 7d, 12h; 0 = never reuse, "
             "none = no limit (default: 30d)")
    add("--orbench-cache-path", dest="orbench_cache_path", metavar="PATH",
        help="SQLite cache file (default: $ORBENCH_CACHE_DIR/responses.sqlite3, "
             "~/.cache/orbench-pytest)")
    add("--orbench-sample", dest="orbench_sample", metavar="N|FRACTION",
        help="Run N prompts per suite (or a fraction), stratified by category")
    add("--orbench-seed", dest="orbench_seed", metavar="N", help="Seed of --orbench-sample")
    add("--orbench-category", dest="orbench_category", action="append", metavar="NAME",
        help="Run only this category (repeatable)")
    add("--orbench-data-dir", dest="orbench_data_dir", metavar="DIR",
        help="Pre-downloaded data files, looked in first (default: $ORBENCH_DATA_DIR)")
    add("--orbench-local-threads", dest="orbench_local_threads", metavar="N",
        help="CPU threads of the embedded local model (default: 1)")
    add("--orbench-results", dest="orbench_results", metavar="PATH",
        help="Write every prompt's outcome and the gate as JSON")
    add("--orbench-baseline", dest="orbench_baseline", metavar="PATH",
        help="Results file of an earlier run: known mismatches xfail, new ones fail")


def pytest_configure(config: pytest.Config) -> None:
    from .errors import ConfigError
    from .session import OrbenchSession
    from .settings import build_settings

    try:
        values = dict(vars(config.option))
        if values.get("orbench_target_version") is None:
            values["orbench_target_version"] = config.getini("orbench_target_version")
        settings = build_settings(values, invocation_dir=config.invocation_params.dir)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = OrbenchSession(config, settings)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "orbench-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
        config.pluginmanager.unregister(session)
        del config.stash[SESSION_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    session = parent.config.stash.get(SESSION_KEY, None)
    if session is None or not session.is_suite_candidate(file_path):
        return None
    from .items import SuiteFile

    return SuiteFile.from_parent(parent, path=file_path)
