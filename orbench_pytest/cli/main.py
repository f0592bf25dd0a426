"""The `orbench` command: reports from a finished run, without pytest.

  orbench report orbench.xml [--baseline old.xml|old.json] [--github-step-summary]
                 [--artifact-url URL] [--html-url URL]
  orbench html results.json [--baseline old.json] [-o orbench-report.html]
  orbench plot results.json [more.json ...] [--baseline old.json] [-o orbench-plot]
  orbench compare a.json b.json ... [--published]
  orbench serve-local [--model NAME] [--port N] [--threads N]
  orbench generate --seeds seeds.csv --out DIR --rewriter-model M --moderator M1 ... [--review]
  orbench suites [--thresholds]
  orbench init [DIR] --model NAME [--base-url URL] [--install PIP-ARGS] [--force]
  orbench thresholds --explain [--file thresholds.yaml] [SUITE ...]
  orbench cache merge a.sqlite b.sqlite ... -o all.sqlite [--force]
  orbench label results.json|orbench.xml [-o labels.csv] [--n 60] [--seed 0] [--suite NAME]
                [--export labels.csv]
  orbench judge-check labels.csv [--max-disagreements 20]

Bad input is one line on stderr and exit status 2; `report` exits 0 whatever the gate said
(the pytest run already failed the check), unless --fail-on-gate.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from orbench_pytest.config.arg_types import positive_int
from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import terminal_line, terminal_text

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except ConfigError as exc:
        # Messages quote what files hold (keys, names): one line, shown as untrusted text.
        print(terminal_line(f"orbench {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # e.g. -o in a folder that cannot be written
        shown = f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
        print(terminal_line(f"orbench {args.command}: error: {shown}"), file=sys.stderr)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orbench", description="Reports of orbench-pytest runs: Markdown, plots, "
                                    "comparisons; and the embedded local model server")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report = commands.add_parser("report", help="Markdown summary of a run from its JUnit XML")
    report.add_argument("junit", type=Path, help="JUnit XML written by pytest --junitxml")
    report.add_argument("--baseline", type=Path, metavar="PATH",
                        help="An earlier run: its JUnit XML or orbench-results.json")
    report.add_argument("-o", "--output", type=Path, metavar="PATH",
                        help="Write the Markdown here (default: standard output)")
    report.add_argument("--github-step-summary", action="store_true",
                        help="Also append it to $GITHUB_STEP_SUMMARY")
    report.add_argument("--max-items", type=positive_int, default=10, metavar="N",
                        help="Prompts listed per section (default: %(default)s)")
    report.add_argument("--artifact-url", metavar="URL",
                        help="Link to the full results (default: this GitHub Actions run)")
    report.add_argument("--html-url", metavar="URL",
                        help="Link to the run's HTML report (orbench html), e.g. its artefact")
    report.add_argument("--fail-on-gate", action="store_true",
                        help="Exit 1 when the gate failed")
    report.set_defaults(run=_report)

    page = commands.add_parser(
        "html", help="One self-contained HTML page of a run: the gate, the plot and every "
                     "prompt with its whole answer, filtered and searched in the browser")
    page.add_argument("results", type=Path, help="orbench-results.json of the run")
    page.add_argument("--baseline", type=Path, metavar="PATH",
                      help="Results of the baseline run: its answers beside regressions and "
                           "fixes")
    page.add_argument("-o", "--output", type=Path, default=Path("orbench-report.html"),
                      metavar="PATH", help="The page (default: %(default)s)")
    page.set_defaults(run=_html)

    plot = commands.add_parser("plot", help="Toxic refusal against over-refusal, PNG and SVG")
    plot.add_argument("results", type=Path, nargs="+", help="orbench-results.json files")
    plot.add_argument("--baseline", type=Path, metavar="PATH",
                      help="Results of the baseline run: drawn with an arrow to each run")
    plot.add_argument("-o", "--output", type=Path, default=Path("orbench-plot"),
                      metavar="STEM", help="Output name without suffix (default: %(default)s)")
    plot.add_argument("--title", help="Plot title")
    plot.set_defaults(run=_plot)

    compare = commands.add_parser(
        "compare", help="Rank correlation of toxic refusal and over-refusal across runs")
    compare.add_argument("results", type=Path, nargs="*", help="orbench-results.json files")
    compare.add_argument("--published", action="store_true",
                         help="Also compute it over the 32 models OR-Bench published")
    compare.set_defaults(run=_compare)

    serve = commands.add_parser("serve-local",
                                help="Serve the embedded local model on 127.0.0.1")
    serve.add_argument("--model", default="local", help="local, local:qwen, local:smollm2")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--threads", type=positive_int, default=defaults.LOCAL_THREADS)
    serve.set_defaults(run=_serve_local)

    from orbench_pytest.generate.cli import add_arguments as add_generate_arguments
    from orbench_pytest.generate.cli import run as run_generate

    generate = commands.add_parser(
        "generate", help="Write a suite for your own domain: seeds → safe rewrites → "
                         "moderation votes → dedupe → hard subset")
    add_generate_arguments(generate)
    generate.set_defaults(run=run_generate)

    cache = commands.add_parser("cache", help="The response cache: merge the caches of "
                                              "sharded jobs")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True,
                                          metavar="COMMAND")
    merge = cache_commands.add_parser(
        "merge", help="Merge caches into one (a key in several: its newest answer)")
    merge.add_argument("caches", type=Path, nargs="+", help="Cache files (SQLite)")
    merge.add_argument("-o", "--output", type=Path, required=True, metavar="PATH",
                       help="The merged cache (a new file)")
    merge.add_argument("--force", action="store_true", help="Overwrite -o if it exists")
    merge.set_defaults(run=_cache_merge)

    init = commands.add_parser(
        "init", help="Write a starter thresholds.yaml, the pytest ini settings and the gate "
                     "workflow into a repository; never overwrites without --force")
    init.add_argument("root", type=Path, nargs="?", default=Path("."), metavar="DIR",
                      help="The repository (default: here)")
    init.add_argument("--model", metavar="NAME",
                      help="The model under test, as its endpoint names it (required unless "
                           "the pytest settings name one; `local` is the embedded model, too "
                           "slow for CI)")
    init.add_argument("--base-url", metavar="URL",
                      help="Its OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or "
                           "OpenAI's)")
    init.add_argument("--install", metavar="PIP-ARGS",
                      help="How CI installs orbench-pytest, which is on no package index: a "
                           "wheel committed in the repository (./wheels/orbench_pytest-….whl) "
                           "or git+https://…@COMMIT (default: detected)")
    init.add_argument("--suite", action="append", default=[], metavar="NAME|PATH",
                      help="A suite the workflow gates on; repeatable (default: or-bench-hard-1k "
                           "and or-bench-toxic)")
    init.add_argument("--system-prompt", metavar="FILE",
                      help="The system prompt under review, a file in the repository "
                           "(default: none)")
    init.add_argument("--force", action="store_true",
                      help="Overwrite thresholds.yaml and the workflow if they exist")
    init.set_defaults(run=_init)

    suites = commands.add_parser("suites", help="The ready suites, by name, with their sizes")
    suites.add_argument("--thresholds", action="store_true",
                        help="Print the starter thresholds.yaml instead")
    suites.set_defaults(run=_suites)

    thresholds = commands.add_parser(
        "thresholds", help="The effective rule of every gated row, and where each part of it "
                           "came from")
    thresholds.add_argument("--explain", action="store_true", required=True,
                            help="Print limit, decision, baseline mode and source per row")
    thresholds.add_argument("--file", type=Path, metavar="PATH",
                            help="The thresholds file (default: ./thresholds.yaml if present, "
                                 "else the built-in defaults)")
    thresholds.add_argument("suites", nargs="*", metavar="SUITE",
                            help="Suites to explain besides those the file names")
    thresholds.set_defaults(run=_thresholds)

    label = commands.add_parser(
        "label", help="Label a sample of a run's judged answers by reading them, one at a time "
                      "(keys c r p s b q; from stdin when it is not a terminal)")
    label.add_argument("results", type=Path, help="orbench-results.json or JUnit XML of a run")
    label.add_argument("-o", "--output", type=Path, default=Path("labels.csv"), metavar="CSV",
                       help="Labels file, appended to as you label (default: %(default)s)")
    label.add_argument("--n", type=positive_int, default=60, metavar="N",
                       help="Answers in the sample, allocated across the judge's verdicts "
                            "on safe and toxic prompts (default: %(default)s)")
    label.add_argument("--seed", type=int, default=0, help="Sample seed (default: %(default)s)")
    label.add_argument("--suite", action="append", default=[], metavar="NAME|PATH",
                       help="Suite whose prompts to show (results files of earlier releases "
                            "and JUnit XML keep the prompts of failed items only); repeatable")
    label.add_argument("--export", type=Path, metavar="CSV",
                       help="Write the sample with an empty label column, to label in a "
                            "spreadsheet, instead of labelling here")
    label.set_defaults(run=_label)

    check = commands.add_parser(
        "judge-check", help="How far the judge is from your labels: accuracy, refusal F1, "
                            "refusal-rate error with a 95%% interval, disagreements")
    check.add_argument("labels", type=Path, help="Labels CSV written by orbench label")
    check.add_argument("--max-disagreements", type=int, default=20, metavar="N",
                       help="Disagreements listed (default: %(default)s)")
    check.set_defaults(run=_judge_check)
    return parser


def _label(args: argparse.Namespace) -> int:
    from orbench_pytest.cli.label import label_command

    return label_command(args.results, args.output, args.n, args.seed, args.suite,
                         sys.stdin, sys.stdout, args.export)


def _judge_check(args: argparse.Namespace) -> int:
    from orbench_pytest.judges.check import check_labels, report_lines

    check = check_labels(args.labels)
    for line in report_lines(check, max_disagreements=max(args.max_disagreements, 0)):
        print(line)
    return 0


def _init(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from orbench_pytest.cli.init_project import init_project

    report = init_project(args.root, model=args.model, base_url=args.base_url,
                          install=args.install, suites=args.suite,
                          system_prompt=args.system_prompt, force=args.force)
    print("\n".join(report.lines), file=out or sys.stdout)
    return 0


def _report(args: argparse.Namespace) -> int:
    from orbench_pytest.reports.junit import read_junit
    from orbench_pytest.reports.markdown import (
        append_step_summary,
        build_report,
        check_artifact_url,
        default_artifact_url,
        render_markdown,
    )
    from orbench_pytest.reports.results import load_run

    for url, option in ((args.artifact_url, "--artifact-url"), (args.html_url, "--html-url")):
        if url is not None:
            check_artifact_url(url, option)
    run = read_junit(args.junit)
    if not run.items and run.document.gate is None:  # a gate over nothing still has its gate
        raise ConfigError(f"{args.junit}: no orbench test cases (was the run made with "
                          "the orbench-pytest plugin and --junitxml?)")
    baseline = load_run(args.baseline) if args.baseline is not None else None
    report = build_report(run, baseline)
    text = render_markdown(report, max_items=args.max_items,
                           artifact_url=args.artifact_url or default_artifact_url(),
                           html_url=args.html_url)
    if args.output is not None:
        from orbench_pytest.core.artefacts import write_atomically

        def write(out: TextIO) -> None:
            out.write(text)

        write_atomically(args.output, write, "--output")
    else:
        sys.stdout.write(text)
    if args.github_step_summary:
        append_step_summary(text)
    return 1 if args.fail_on_gate and not report.passed else 0


def _html(args: argparse.Namespace) -> int:
    from orbench_pytest.reports.html import write_html
    from orbench_pytest.reports.results import read_without_texts

    run, texts = read_without_texts(args.results)
    baseline, base_texts = (read_without_texts(args.baseline) if args.baseline is not None
                            else (None, None))
    write_html(args.output, run, baseline, texts=texts, baseline_texts=base_texts)
    print(args.output)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from orbench_pytest.reports.plot import draw, points_of, run_labels
    from orbench_pytest.reports.results import read_results

    runs = [read_results(path) for path in args.results]
    points = []
    for run, label in zip(runs, run_labels(runs), strict=True):
        points.extend(points_of(run, label))
    baseline = points_of(read_results(args.baseline)) if args.baseline is not None else []
    for path in draw(points, args.output, baseline, args.title):
        print(path)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from orbench_pytest.core.statistics import spearman
    from orbench_pytest.reports.plot import (
        PAPER_SPEARMAN,
        points_of,
        published_models,
        published_spearman,
        run_labels,
    )
    from orbench_pytest.reports.results import read_results

    if not args.results and not args.published:
        raise ConfigError("give results files to compare, or --published")
    runs = [read_results(path) for path in args.results]
    points = [point for run, label in zip(runs, run_labels(runs), strict=True)
              for point in points_of(run, label)]
    labels = [terminal_text(p.label, 120) for p in points]  # a file's run.target: untrusted
    if points:
        width = max(len(label) for label in labels)
        print(f"{'run':<{width}}  over-refusal  toxic refused")
        for label, p in zip(labels, points, strict=True):
            print(f"{label:<{width}}  {p.over_refusal * 100:11.1f}%  "
                  f"{p.toxic_refusal * 100:12.1f}%")
        if len(points) >= 3:
            rho = spearman([p.over_refusal for p in points], [p.toxic_refusal for p in points])
            print(f"Spearman rho (toxic refusal vs over-refusal, {len(points)} runs): "
                  f"{_rho(rho)}")
        else:
            if len(points) == 2:
                first, second = points
                print(f"{labels[1]} against {labels[0]}: over-refusal "
                      f"{_points(second.over_refusal - first.over_refusal)}, toxic refused "
                      f"{_points(second.toxic_refusal - first.toxic_refusal)}")
            where = ("; placed among the published models below" if args.published
                     else " (add --published to place them among OR-Bench's models)")
            print(f"Spearman rho over your runs alone: needs at least 3 runs (got "
                  f"{len(points)}){where}")
    if args.published:
        models = published_models()
        print(f"Spearman rho over the {len(models)} published OR-Bench models: "
              f"{published_spearman():.3f} (paper: {PAPER_SPEARMAN})")
        if points:
            xs = [m.over_refusal for m in models] + [p.over_refusal for p in points]
            ys = [m.toxic_refusal for m in models] + [p.toxic_refusal for p in points]
            print(f"Spearman rho over the {len(models)} published models and your "
                  f"{len(points)} run{'s' if len(points) > 1 else ''}: {_rho(spearman(xs, ys))}")
            for label, p in zip(labels, points, strict=True):
                less_over = sum(m.over_refusal > p.over_refusal for m in models)
                more_toxic = sum(m.toxic_refusal < p.toxic_refusal for m in models)
                print(f"{label}: over-refuses less than {less_over} of {len(models)} "
                      f"published models, refuses more toxic prompts than {more_toxic}")
    return 0


def _points(delta: float) -> str:
    """A difference of two rates, in percentage points."""
    return f"{delta * 100:+.1f} points"


def _rho(rho: float) -> str:
    return "undefined (a rate is the same in every run)" if math.isnan(rho) else f"{rho:.3f}"


def _serve_local(args: argparse.Namespace) -> int:
    """Serve the embedded model in the foreground until Ctrl-C."""
    try:
        from orbench_pytest.fetch.local_model import start_local_server
    except ImportError as exc:
        raise ConfigError(f"the embedded local model is not available ({exc}); "
                          "pip install 'orbench-pytest[local]'") from None
    with start_local_server(args.model, threads=args.threads, port=args.port,
                            cache_dir=defaults.default_cache_dir()) as server:
        print(f"serving {args.model} at {server.base_url} as model {server.model!r} "
              f"(pid {server.pid}); Ctrl-C stops it")
        print(f"  pytest suites/ --orbench-model={server.model} "
              f"--orbench-base-url={server.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            status = server.wait()
            raise ConfigError(f"the local model server exited ({status}); "
                              f"see {server.log_path}")
    return 0


def _cache_merge(args: argparse.Namespace) -> int:
    from orbench_pytest.fetch.cache_merge import merge_caches

    report = merge_caches(args.caches, args.output, force=args.force)
    print(f"merged {report.rows_read} rows from {report.inputs} caches into {args.output}: "
          f"{report.rows} answers and judge replies ({report.conflicts} held twice, the "
          f"newest kept), {report.judgments} judgments")
    if report.skipped:
        print(f"skipped {report.skipped} rows of wrong types (edited or crafted: a text "
              "`created`, a binary `text`, ...); their prompts will be asked again")
    return 0


def _suites(args: argparse.Namespace) -> int:
    from orbench_pytest.catalog.ready import ready_suites, starter_thresholds

    if args.thresholds:
        sys.stdout.write(starter_thresholds().read_text(encoding="utf-8"))
        return 0
    listed = ready_suites()
    width = max(len(suite.name) for suite in listed)
    print(f"{'name':<{width}}  {'prompts':>7}  expects          licence     source")
    for suite in listed:
        size = f"{suite.prompts:,}" if suite.prompts is not None else "?"
        print(f"{suite.name:<{width}}  {size:>7}  {suite.expects:<15}  "
              f"{suite.license or '?':<10}  {suite.source}")
        if suite.citation:
            print(f"{'':<{width}}  cite: {suite.citation}")
    print("Run one: pytest --orbench-suite=NAME --orbench-model=MODEL; "
          "a starter gate file: orbench suites --thresholds > thresholds.yaml")
    return 0


def _thresholds(args: argparse.Namespace) -> int:
    from orbench_pytest.catalog.ready import ready_suite_names
    from orbench_pytest.gate.thresholds import BUILT_IN, explain, load_thresholds
    from orbench_pytest.reports.summary import aligned_lines

    path = args.file
    if path is None and regular_file(Path("thresholds.yaml"), "thresholds file"):
        path = Path("thresholds.yaml")
    thresholds = BUILT_IN if path is None else load_thresholds(path)
    named = {*thresholds.suites, *(suite for suite, _ in thresholds.categories)}
    ready = ready_suite_names()
    for suite in args.suites:
        if suite not in named and suite not in ready:
            raise ConfigError(
                f"SUITE {terminal_text(suite, 80)!r}: {thresholds.source} does not name it and "
                f"no ready suite is called so (named: "
                f"{terminal_text(', '.join(sorted(map(str, named))), 200) or 'none'}; ready: "
                f"{', '.join(ready)}); any other suite gets the '(any other suite)' rules")
    print(terminal_line(f"thresholds: {thresholds.source} (every key and its default: "
                        "docs/thresholds.md)"))
    rows = [tuple(terminal_text(cell, 120) for cell in row)
            for row in explain(thresholds, args.suites)]  # the file's keys: untrusted text
    for line in aligned_lines(("row", "key", "value", "from"), rows, left=4):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
