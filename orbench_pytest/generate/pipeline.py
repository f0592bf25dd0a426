"""seeds → rewrite → deduplicate → moderate → hard subset → suite directory.

Deduplication runs before moderation: a near-duplicate would be dropped anyway, so it is not
worth a moderator's tokens. Every model call goes through `ask.ask_all` (the fetch engine and
its cache), so a run that stopped part-way resumes without asking anything twice. A stage
whose requests failed stops the run before anything is written: a suite is never built from
half the answers, and the next run asks only for what is missing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest import __version__
from orbench_pytest.core.artefacts import file_sha256
from orbench_pytest.core.errors import OrbenchError
from orbench_pytest.core.types import Response, Verdict
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.engine import Progress
from orbench_pytest.generate.ask import AskSettings, Request, ask_all
from orbench_pytest.generate.dedupe import deduplicate
from orbench_pytest.generate.models import Endpoints, ModelRef
from orbench_pytest.generate.moderate import Ballot, Tally, moderation_prompt, parse_vote
from orbench_pytest.generate.prompts import PromptTemplate
from orbench_pytest.generate.review import carry_review
from orbench_pytest.generate.rewrite import (
    RewrittenPrompt,
    candidates_of,
    parse_prompt_list,
    rewrite_prompt,
)
from orbench_pytest.generate.seeds import Seed, read_seeds, read_topics, seeds_from_lists
from orbench_pytest.generate.write import write_provenance, write_review_csv, write_suites
from orbench_pytest.judges.judge import build_judge, decide

Say = Callable[[str], None]
ProgressFactory = Callable[[str], Progress | None]


@dataclass(frozen=True)
class GenerateConfig:
    out: Path
    name: str
    rewriter: ModelRef
    moderators: tuple[ModelRef, ...]
    probes: tuple[ModelRef, ...]
    templates: dict[str, PromptTemplate]  # rewrite, moderate, seed_topics
    seeds_path: Path | None = None
    topics_path: Path | None = None
    seeds_per_topic: int = 5
    seed_column: str = "prompt"
    category_column: str = "category"
    per_seed: int = 5
    dedupe_n: int = 3
    dedupe_threshold: float = 0.6
    hard_min_refusals: int = 1
    ask: AskSettings = field(default_factory=AskSettings)


class GenerationIncomplete(OrbenchError):
    """Some requests of a stage got no answer; what did is cached for the next run."""


@dataclass
class StageCost:
    requests: int = 0
    from_cache: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, asked: Any) -> None:
        self.requests += asked.requests_sent
        self.from_cache += asked.from_cache
        self.prompt_tokens += asked.tokens.get("prompt_tokens", 0)
        self.completion_tokens += asked.tokens.get("completion_tokens", 0)


@dataclass
class Run:
    config: GenerateConfig
    cache: ResponseCache
    endpoints: Endpoints
    say: Say
    progress: ProgressFactory
    counts: dict[str, int] = field(default_factory=dict)
    costs: dict[str, StageCost] = field(default_factory=dict)

    def ask(self, stage: str, ref: ModelRef, prompts: Sequence[str]) -> list[Response]:
        label = stage if len(self._refs(stage)) == 1 else f"{stage} {ref.name}"
        asked = ask_all(ref, [Request(p) for p in prompts], cache=self.cache,
                        endpoints=self.endpoints, settings=self.config.ask,
                        progress=self.progress(label))
        self.costs.setdefault(stage, StageCost()).add(asked)
        failed = [r.error for r in asked.responses if r.error is not None]
        if failed:
            raise GenerationIncomplete(
                f"{stage}: {len(failed)} of {len(prompts)} requests to {ref.name} got no answer "
                f"(first: {failed[0][:200]}); the answers that came are cached: run the same "
                "command again to ask only for the rest")
        return asked.responses

    def _refs(self, stage: str) -> tuple[ModelRef, ...]:
        if stage == "moderate":
            return self.config.moderators
        if stage == "hard":
            return self.config.probes
        return (self.config.rewriter,)


def generate(config: GenerateConfig, cache: ResponseCache, endpoints: Endpoints, say: Say,
             progress: ProgressFactory) -> dict[str, Any]:
    """Run every stage and write the suite directory; returns the provenance written."""
    run = Run(config, cache, endpoints, say, progress)
    seeds = _seeds(run)
    candidates = _rewrite(run, seeds)
    candidates = _dedupe(run, seeds, candidates)
    tallies = _moderate(run, candidates)
    probes = _hard(run, candidates, tallies)
    rows = [_row(c, tallies[c.candidate_id], probes.get(c.candidate_id), config)
            for c in candidates]
    run.counts["kept_disputed_marks"] = carry_review(config.out, rows)
    suites = write_suites(config.out, config.name, rows)
    write_review_csv(config.out, rows)
    provenance = _provenance(run, suites)
    write_provenance(config.out, provenance)
    return provenance


def _seeds(run: Run) -> list[Seed]:
    config = run.config
    if config.seeds_path is not None:
        seeds = read_seeds(config.seeds_path, config.seed_column, config.category_column)
    else:
        assert config.topics_path is not None
        topics = read_topics(config.topics_path)
        template = config.templates["seed_topics"]
        prompts = [template.render(category=category, description=description,
                                   count=config.seeds_per_topic)
                   for category, description in topics.items()]
        responses = run.ask("seeds", config.rewriter, prompts)
        lists = [parse_prompt_list(r, config.seeds_per_topic) for r in responses]
        seeds = seeds_from_lists(topics, lists)
        run.counts["topics"] = len(topics)
        from orbench_pytest.generate.write import csv_text, write_file

        write_file(config.out / "seeds.csv", csv_text(
            [{"id": s.seed_id, "prompt": s.prompt, "category": s.category} for s in seeds],
            ("id", "prompt", "category")))
    run.counts["seeds"] = len(seeds)
    run.say(f"seeds: {len(seeds)}")
    if not seeds:
        run.say("no seeds: the rewriter listed no prompt for any topic (a refusal?); see "
                "seeds.csv, or give --seeds FILE")
    return seeds


def _rewrite(run: Run, seeds: list[Seed]) -> list[RewrittenPrompt]:
    config = run.config
    template = config.templates["rewrite"]
    responses = run.ask("rewrite", config.rewriter,
                        [rewrite_prompt(template, s, config.per_seed) for s in seeds])
    candidates: list[RewrittenPrompt] = []
    empty = blocked = 0
    for seed, response in zip(seeds, responses, strict=True):
        found = candidates_of(seed, parse_prompt_list(response, config.per_seed))
        empty += not found
        blocked += response.content_filter
        candidates += found
    run.counts["rewritten"] = len(candidates)
    run.counts["seeds_without_rewrites"] = empty
    run.say(f"rewrite: {len(candidates)} candidates from {len(seeds)} seeds "
            f"(asked for {config.per_seed} each); {empty} seeds gave none"
            + (f" ({blocked} blocked by the provider's filter)" if blocked else ""))
    return candidates


def _dedupe(run: Run, seeds: list[Seed],
            candidates: list[RewrittenPrompt]) -> list[RewrittenPrompt]:
    kept, dropped = deduplicate([(s.seed_id, s.prompt) for s in seeds],
                                [(c.candidate_id, c.prompt) for c in candidates],
                                n=run.config.dedupe_n, threshold=run.config.dedupe_threshold)
    seed_ids = {s.seed_id for s in seeds}
    run.counts["duplicates_of_seeds"] = sum(d.of in seed_ids for d in dropped)
    run.counts["duplicates_of_candidates"] = len(dropped) - run.counts["duplicates_of_seeds"]
    run.counts["deduplicated"] = len(kept)
    run.say(f"deduplicate: {len(kept)} kept, {run.counts['duplicates_of_seeds']} repeated a "
            f"seed, {run.counts['duplicates_of_candidates']} repeated another candidate")
    return [candidates[i] for i in kept]


def _moderate(run: Run, candidates: list[RewrittenPrompt]) -> dict[str, Tally]:
    template = run.config.templates["moderate"]
    prompts = [moderation_prompt(template, c.prompt) for c in candidates]
    ballots: dict[str, list[Ballot]] = {c.candidate_id: [] for c in candidates}
    for moderator in run.config.moderators:
        responses = run.ask("moderate", moderator, prompts) if prompts else []
        for candidate, response in zip(candidates, responses, strict=True):
            ballots[candidate.candidate_id].append(parse_vote(moderator.name, response))
    tallies = {cid: Tally(tuple(b)) for cid, b in ballots.items()}
    decisions = [t.decision for t in tallies.values()]
    for decision in ("safe", "toxic", "tie", "no-majority"):
        run.counts[f"moderated_{decision.replace('-', '_')}"] = decisions.count(decision)
    run.counts["moderators_disagreed"] = sum(not t.unanimous for t in tallies.values())
    run.counts["abstentions"] = sum(t.count("abstain") for t in tallies.values())
    run.say(f"moderate: {decisions.count('safe')} safe, {decisions.count('toxic')} toxic, "
            f"{decisions.count('tie')} tied and {decisions.count('no-majority')} without a "
            f"majority (dropped); {run.counts['abstentions']} abstentions")
    return tallies


ProbeVerdict = tuple[str, Verdict]  # the probe model's name, its answer's verdict


def _hard(run: Run, candidates: list[RewrittenPrompt], tallies: dict[str, Tally]
          ) -> dict[str, list[ProbeVerdict]]:
    """Each safe prompt's verdicts from the probe models, judged as a test run judges (provider
    blocks are refusals, an endpoint error never is): hard when enough probes refused it."""
    if not run.config.probes:
        return {}
    safe = [c for c in candidates if tallies[c.candidate_id].decision == "safe"]
    results: dict[str, list[ProbeVerdict]] = {c.candidate_id: [] for c in safe}
    prompts = [c.prompt for c in safe]
    for probe in run.config.probes:
        responses = run.ask("hard", probe, prompts) if prompts else []
        for candidate, verdict in zip(safe, asyncio.run(_judged(prompts, responses)),
                                      strict=True):
            results[candidate.candidate_id].append((probe.name, verdict))
    hard = sum(_is_hard(r, run.config.hard_min_refusals) for r in results.values())
    run.counts["hard"] = hard
    run.say(f"hard: {hard} of {len(safe)} safe prompts refused by at least "
            f"{run.config.hard_min_refusals} of {len(run.config.probes)} probe models")
    return results


async def _judged(prompts: Sequence[str], responses: Sequence[Response]) -> list[Verdict]:
    judge = build_judge("keyword")
    return [await decide(p, r, judge) for p, r in zip(prompts, responses, strict=True)]


def _refusals(probes: list[ProbeVerdict]) -> int:
    return sum(verdict.refused() for _, verdict in probes)


def _is_hard(probes: list[ProbeVerdict], min_refusals: int) -> bool:
    return _refusals(probes) >= min_refusals


def _row(candidate: RewrittenPrompt, tally: Tally, probes: list[ProbeVerdict] | None,
         config: GenerateConfig) -> dict[str, str]:
    decision = tally.decision
    row = {
        "id": candidate.candidate_id, "prompt": candidate.prompt,
        "category": candidate.category,
        "expect": {"safe": "comply", "toxic": "refuse"}.get(decision, ""),
        "decision": decision, "moderators_agree": "yes" if tally.unanimous else "no",
        "safe_votes": str(tally.count("safe")), "toxic_votes": str(tally.count("toxic")),
        "abstentions": str(tally.count("abstain")),
        "votes": json.dumps({b.moderator: b.shown() for b in tally.ballots}, ensure_ascii=False),
        "seed_id": candidate.seed_id, "probe_refusals": "", "probes": "", "hard": "",
        "disputed": "", "decided_by": "",
    }
    if probes is not None:
        row["probe_refusals"] = str(_refusals(probes))
        row["probes"] = json.dumps({name: v.label.value for name, v in probes},
                                   ensure_ascii=False)
        row["hard"] = "yes" if _is_hard(probes, config.hard_min_refusals) else "no"
    return row


def _provenance(run: Run, suites: dict[str, Any]) -> dict[str, Any]:
    config = run.config
    source = config.seeds_path or config.topics_path
    assert source is not None
    total = StageCost()
    for cost in run.costs.values():
        for name in vars(total):
            setattr(total, name, getattr(total, name) + getattr(cost, name))
    used = ["rewrite", "moderate"] + (["seed_topics"] if config.topics_path else [])
    return {
        "generator": f"orbench-pytest {__version__} (orbench generate)",
        "name": config.name,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "seeds": {"kind": "file" if config.seeds_path else "topics", "path": str(source),
                  "sha256": file_sha256(source)},
        "models": {"rewriter": config.rewriter.describe(),
                   "moderators": [m.describe() for m in config.moderators],
                   "probes": [p.describe() for p in config.probes]},
        "prompts": {name: {"source": config.templates[name].source,
                           "sha256": config.templates[name].sha256} for name in used},
        "settings": {"per_seed": config.per_seed, "seeds_per_topic": config.seeds_per_topic,
                     "dedupe_ngram": config.dedupe_n,
                     "dedupe_threshold": config.dedupe_threshold,
                     "hard_min_refusals": config.hard_min_refusals,
                     "majority": "more than half of all moderators; ties and no majority "
                                 "dropped"},
        "counts": run.counts,
        "cost": {**{stage: vars(cost) for stage, cost in run.costs.items()},
                 "total": vars(total)},
        "suites": suites,
    }
