"""`orbench generate`: its options, checked, and the run. Heavy imports wait for the run."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orbench_pytest.config.arg_types import positive_int
from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import existing_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import ENV_NAME, NAME
from orbench_pytest.core.paths import resolved
from orbench_pytest.fetch.progress import ProgressLine

if TYPE_CHECKING:
    from orbench_pytest.generate.pipeline import GenerateConfig

EXIT_INCOMPLETE = 1
EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("seeds")
    source.add_argument("--seeds", type=Path, metavar="FILE",
                        help="CSV or JSONL of toxic prompts with a category column")
    source.add_argument("--seed-topics", type=Path, metavar="FILE",
                        help="YAML of category: description; the rewriter writes the seeds")
    source.add_argument("--seeds-per-topic", type=positive_int, default=5, metavar="N",
                        help="Seeds written per topic with --seed-topics (default: %(default)s)")
    source.add_argument("--seed-column", default="prompt", metavar="NAME",
                        help="Column of the seed prompt (default: %(default)s)")
    source.add_argument("--category-column", default="category", metavar="NAME",
                        help="Column of the category (default: %(default)s)")

    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, required=True, metavar="DIR",
                     help="Suite folder to write (or to review / rebuild)")
    out.add_argument("--name", metavar="NAME",
                     help="Suite name prefix (default: the folder's name)")
    out.add_argument("--review", action="store_true",
                     help="List the rows to review, disagreements first (after generating, "
                          "or alone on an existing folder)")
    out.add_argument("--review-rows", type=positive_int, default=20, metavar="N",
                     help="Rows listed by --review (default: %(default)s)")
    out.add_argument("--rebuild", action="store_true",
                     help="Rebuild the suites and their sha256 pins from the reviewed "
                          "generated.csv (a row with a 'disputed' cell goes to disputed.yaml: "
                          "test runs skip it); asks no model")

    models = parser.add_argument_group("models (a name on an OpenAI-compatible endpoint, "
                                       "or local / local:NAME for the embedded model)")
    models.add_argument("--rewriter-model", metavar="MODEL")
    models.add_argument("--rewriter-base-url", metavar="URL")
    models.add_argument("--rewriter-temperature", type=float, default=0.7, metavar="T",
                        help="Default: %(default)s (moderators and probes use 0)")
    models.add_argument("--moderator", action="append", default=[], metavar="MODEL",
                        help="A moderator; repeat for an ensemble (an odd number avoids ties)")
    models.add_argument("--moderator-base-url", metavar="URL")
    models.add_argument("--probe-model", action="append", default=[], metavar="MODEL",
                        help="Answers the safe prompts for the hard subset; repeatable")
    models.add_argument("--probe-base-url", metavar="URL")
    models.add_argument("--api-key-env", default=defaults.API_KEY_ENV, metavar="NAME",
                        help="Environment variable holding the API key (default: "
                             "%(default)s); the key itself is never an option")
    models.add_argument("--local-threads", type=positive_int, default=defaults.LOCAL_THREADS,
                        metavar="N", help="CPU threads of the embedded model (default: "
                                          "%(default)s)")

    stages = parser.add_argument_group("stages")
    stages.add_argument("--per-seed", type=positive_int, default=5, metavar="N",
                        help="Safe rewrites asked per seed (default: %(default)s)")
    stages.add_argument("--hard-min-refusals", type=positive_int, default=1, metavar="K",
                        help="Probe refusals that make a prompt hard (default: %(default)s)")
    stages.add_argument("--dedupe-ngram", type=positive_int, default=3, metavar="N",
                        help="Word n-gram size of the near-duplicate test (default: %(default)s)")
    stages.add_argument("--dedupe-threshold", type=_fraction, default=0.6, metavar="F",
                        help="Jaccard overlap at which a candidate is a duplicate "
                             "(default: %(default)s)")
    stages.add_argument("--rewrite-prompt", type=Path, metavar="FILE",
                        help="Own rewriting template ($seed, $count, $category)")
    stages.add_argument("--moderation-prompt", type=Path, metavar="FILE",
                        help="Own moderation template ($prompt)")
    stages.add_argument("--seed-prompt", type=Path, metavar="FILE",
                        help="Own seed-writing template ($category, $description, $count)")

    fetch = parser.add_argument_group("requests")
    fetch.add_argument("--concurrency", type=positive_int, default=defaults.GENERATE_CONCURRENCY,
                       metavar="N")
    fetch.add_argument("--max-retries", type=int, default=defaults.MAX_RETRIES, metavar="N")
    fetch.add_argument("--timeout", type=float, default=defaults.TIMEOUT_S, metavar="SECONDS")
    fetch.add_argument("--request-seed", type=int, default=0, metavar="N",
                       help="Sampling seed sent with every request (default: %(default)s)")
    fetch.add_argument("--max-tokens", type=positive_int, metavar="N",
                       help="Cap on every answer (default: sized per role)")
    fetch.add_argument("--probe-max-tokens", type=positive_int, default=128, metavar="N",
                       help="Cap on a probe's answer: its opening tells a refusal "
                            "(default: %(default)s)")
    fetch.add_argument("--cache-path", type=Path, metavar="PATH",
                       help="Response cache (default: generate.sqlite3 in the orbench cache "
                            "folder); a rerun reads it and asks only what is missing")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number in (0, 1]")
    return value


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    if args.rebuild or (args.review and args.seeds is None and args.seed_topics is None):
        return _review_only(args)
    if (args.seeds is None) == (args.seed_topics is None):
        raise ConfigError("give exactly one of --seeds FILE or --seed-topics FILE "
                          "(or --review / --rebuild on an existing --out folder)")
    if out.exists() and not out.is_dir():  # checked before any model is asked
        raise ConfigError(f"--out {out}: not a folder (give a folder; it is made if absent)")
    config = _config(args)
    from orbench_pytest.core.defaults import default_cache_dir
    from orbench_pytest.fetch.cache import ResponseCache
    from orbench_pytest.generate.models import Endpoints, check_keys
    from orbench_pytest.generate.pipeline import GenerationIncomplete, generate

    models = [config.rewriter, *config.moderators, *config.probes]
    # As the plugin does: every key this run could use, and the well-known key variables, are
    # redacted wherever a model echoes one (answers, suite files, messages).
    from orbench_pytest.core.redact import register_configured_secrets

    register_configured_secrets(os.environ, [ref.api_key_env for ref in models],
                                [ref.base_url for ref in models])
    check_keys(models)
    cache_dir = default_cache_dir(os.environ)
    cache = ResponseCache(args.cache_path or cache_dir / "generate.sqlite3")
    endpoints = Endpoints(cache_dir, args.local_threads)
    try:
        provenance = generate(config, cache, endpoints, _say, StageProgress)
    except GenerationIncomplete as exc:
        from orbench_pytest.core.untrusted import inert_text

        _say(f"incomplete: {inert_text(exc, 600)}")
        return EXIT_INCOMPLETE
    except KeyboardInterrupt:
        _say("interrupted: the answers that came are cached; run the same command again to "
             "resume")
        return EXIT_INTERRUPTED
    finally:
        endpoints.close()
        cache.close()
    _summary(out, provenance)
    if args.review:
        _print_review(args)
    return 0


def _config(args: argparse.Namespace) -> GenerateConfig:
    from orbench_pytest.fetch.targets import GenerationParams
    from orbench_pytest.generate.ask import AskSettings
    from orbench_pytest.generate.models import model_ref
    from orbench_pytest.generate.pipeline import GenerateConfig
    from orbench_pytest.generate.prompts import load_template

    if not args.rewriter_model:
        raise ConfigError("--rewriter-model: missing (a model name, or local)")
    if not args.moderator:
        raise ConfigError("--moderator: give at least one (repeat it for an ensemble)")
    if len(set(args.moderator)) != len(args.moderator):
        raise ConfigError("--moderator: the same model twice; each moderator votes once")
    if len(set(args.probe_model)) != len(args.probe_model):
        raise ConfigError("--probe-model: the same model twice")
    if args.probe_model and args.hard_min_refusals > len(args.probe_model):
        raise ConfigError(f"--hard-min-refusals: {args.hard_min_refusals} is more than the "
                          f"{len(args.probe_model)} --probe-model given")
    if not ENV_NAME.match(args.api_key_env):
        raise ConfigError(f"--api-key-env: {args.api_key_env!r} is not an environment "
                          "variable name")
    if not 0.0 <= args.rewriter_temperature <= 2.0:
        raise ConfigError("--rewriter-temperature: expected a number from 0 to 2")
    if args.max_retries < 0 or args.timeout <= 0 or args.request_seed < 0:
        raise ConfigError("--max-retries, --request-seed must be >= 0 and --timeout > 0")
    name = args.name or resolved(args.out, "--out").name
    if not NAME.match(name):
        raise ConfigError(f"--name: {name!r} must be letters, digits, '-', '_' or '.' "
                          "(it names the suites)")

    def params(temperature: float, max_tokens: int) -> GenerationParams:
        return GenerationParams(temperature=temperature,
                                max_tokens=args.max_tokens or max_tokens,
                                seed=args.request_seed, timeout_s=args.timeout)

    key_env = args.api_key_env
    listed = max(args.per_seed, args.seeds_per_topic if args.seed_topics else 0)
    # Caps sized per role: a list of prompts, one word, an answer's opening (enough to judge).
    rewriter = model_ref("rewriter", "--rewriter-model", args.rewriter_model,
                         args.rewriter_base_url, key_env,
                         params(args.rewriter_temperature, 60 * listed + 60))
    moderators = tuple(model_ref("moderator", "--moderator", m, args.moderator_base_url,
                                 key_env, params(0.0, 16)) for m in args.moderator)
    probes = tuple(model_ref("probe", "--probe-model", p, args.probe_base_url, key_env,
                             params(0.0, args.probe_max_tokens)) for p in args.probe_model)
    templates = {"rewrite": load_template("rewrite", args.rewrite_prompt, "--rewrite-prompt"),
                 "moderate": load_template("moderate", args.moderation_prompt,
                                           "--moderation-prompt"),
                 "seed_topics": load_template("seed_topics", args.seed_prompt, "--seed-prompt")}
    for option, path in (("--seeds", args.seeds), ("--seed-topics", args.seed_topics)):
        if path is not None:
            existing_file(path, option)
    return GenerateConfig(
        out=args.out, name=name, rewriter=rewriter, moderators=moderators, probes=probes,
        templates=templates, seeds_path=args.seeds, topics_path=args.seed_topics,
        seeds_per_topic=args.seeds_per_topic, seed_column=args.seed_column,
        category_column=args.category_column, per_seed=args.per_seed,
        dedupe_n=args.dedupe_ngram, dedupe_threshold=args.dedupe_threshold,
        hard_min_refusals=args.hard_min_refusals,
        ask=AskSettings(concurrency=args.concurrency, max_retries=args.max_retries))


def _review_only(args: argparse.Namespace) -> int:
    if args.seeds is not None or args.seed_topics is not None:
        raise ConfigError("--rebuild reads the reviewed folder only: drop --seeds/--seed-topics")
    if args.rebuild:
        from orbench_pytest.generate.review import rebuild

        provenance = rebuild(args.out)
        disputed = provenance["review"]["disputed"]
        _say(f"rebuilt from {args.out / 'generated.csv'}: {disputed} disputed rows"
             + (f" listed in {args.out / 'disputed.yaml'} (skipped by test runs, out of "
                "every rate)" if disputed else ""))
        _suite_lines(args.out, provenance["suites"])
    if args.review:
        _print_review(args)
    return 0


def _print_review(args: argparse.Namespace) -> None:
    from orbench_pytest.generate.review import read_review_rows, review_lines

    for line in review_lines(read_review_rows(args.out), args.review_rows):
        print(line)


def _summary(out: Path, provenance: dict[str, object]) -> None:
    cost = provenance["cost"]
    assert isinstance(cost, dict)
    total = cost["total"]
    _say(f"cost: {total['requests']} requests ({total['from_cache']} answers from the cache), "
         f"{total['prompt_tokens']} prompt + {total['completion_tokens']} completion tokens")
    suites = provenance["suites"]
    assert isinstance(suites, dict)
    _suite_lines(out, suites)


def _suite_lines(out: Path, suites: dict[str, dict[str, object]]) -> None:
    for kind, suite in suites.items():
        if suite["rows"]:
            _say(f"wrote {out / str(suite['suite'])}: {suite['rows']} prompts")
        else:
            _say(f"no {kind} prompts: no {kind} suite")
    _say(f"review {out / 'generated.csv'} (disagreements first), then run: pytest {out}")


def _say(text: str) -> None:
    print(f"orbench generate: {text}", file=sys.stderr, flush=True)


class StageProgress(ProgressLine):
    """The fetch engine's progress, named after the stage; a finished stage ends its line."""

    def __init__(self, stage: str) -> None:
        super().__init__(self._write, sys.stderr.isatty())
        self.stage = stage

    def __call__(self, done: int, total: int, errors: int,
                 concurrency: int | None = None) -> None:
        super().__call__(done, total, errors, concurrency)
        if done == total and self._tty:
            sys.stderr.write("\n")

    def text(self, done: int, total: int, errors: int, now: float) -> str:
        return (f"orbench generate: {self.stage}: {done}/{total} answered, {errors} errors, "
                f"{now - self._started:.0f}s")

    @staticmethod
    def _write(text: str, rewrite: bool) -> None:
        sys.stderr.write(("\r" + text) if rewrite else text + "\n")
        sys.stderr.flush()
