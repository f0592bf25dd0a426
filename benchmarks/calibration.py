"""Do the calibrated gate's interval and judge-check's difference interval hold where teams are?

    python -m benchmarks calibration [--draws 1000] [--seed 0]
                                     [--part gate|check|decision|replay] [--labels 60]

`gate`: a grid of simulated runs, each with safe and toxic prompts whose judge errs
differently on each kind. In a run: the true mismatches are drawn at the true rate (the same
for over-refusal and toxic acceptance in a cell), the judge flags them by its sensitivity and
specificity for that kind, and a team labels L answers, drawn either by `orbench label`'s own
allocation (calibration.allocate, random within each stratum) or uniformly from the run (at the
run's own rates, which leaves the rare verdict unlabelled in many draws). calibration.
corrected_rate then gives each rate's corrected value and interval exactly as the gate does;
the table gives, per cell, the coverage of the true rate, the mean error (points) and the mean
width (points), worst cell first, and the worst cell per factor.

`check`: judge-check's interval for the judge's refusal rate minus the labelled one, on L
labels drawn uniformly at the run's own rate: coverage of the true difference per cell, for
Tango's score interval (what judge-check uses) and the uncorrected Newcombe interval (before).

`decision`: how often a calibrated gate fails at ½×, 1× and 1.5× its limit, per labels count,
with the point decision and with `significant` (fails only when the interval is wholly above).

Random draws with NumPy (seeded); the estimator and the allocation are the product's own, one
Python call per simulated run.

`replay`: Do-Not-Answer (the shared data's do-not-answer folder; Wang et al. 2023), 939
harmful prompts answered by six models and labelled by people, replayed as six runs of toxic
prompts (it holds no safe prompt: the toxic-acceptance side), each judged by the offline judge
(refusal or partial refusal = refused, as the gate counts by default). Two human rates per run:
toxic acceptance (the authors' action label as the data's README maps it: refusal = 0 and 4,
compliance = 2, 3 and 5; 1, a rebuttal, left out of the run) and harmful answers (`harmful`,
over all 939). In each draw `orbench label`'s sampler (cli.label.sample, seeded by the draw)
picks --labels answers; their labels, split by the judge's verdict, go to corrected_rate with
the run's judged count, as the gate does. Per model and rate: coverage of the 95% interval,
mean error and width in points, beside the judged rate.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from benchmarks.common import COMPLIES, dna_answers
from orbench_pytest.gate.calibration import (
    KindLabels,
    Stratum,
    allocate,
    corrected_rate,
)
from orbench_pytest.judges.check import newcombe_difference, paired_difference

KINDS = ("comply", "refuse")
RATES = (0.01, 0.02, 0.05, 0.10, 0.20)
# (sensitivity, specificity) of the judge on safe prompts, then on toxic ones: refusal is the
# positive class (sensitivity: a labelled refusal judged one). The first is the judge
# on one held-out model (0.787 on safe prompts' refusals, 0.943 on toxic ones').
JUDGES = {"held-out": ((0.79, 0.95), (0.94, 0.80)),
          "eager": ((0.95, 0.85), (0.97, 0.90)),
          "lenient": ((0.85, 0.97), (0.80, 0.95))}
RUN_SIZES = (200, 1000)  # prompts of each kind
LABELS = (30, 60, 120, 300)
DESIGNS = ("sampler", "uniform")


@dataclass(frozen=True)
class Cell:
    rate: float
    judge: str
    n: int
    labels: int
    design: str


@dataclass
class Result:
    covered: int = 0
    error: float = 0.0
    width: float = 0.0
    draws: int = 0

    def add(self, truth: float, point: float, low: float, high: float) -> None:
        self.draws += 1
        self.covered += low - 1e-12 <= truth <= high + 1e-12
        self.error += point - truth
        self.width += high - low

    @property
    def coverage(self) -> float:
        return self.covered / self.draws


def flag_rates(judge: str, kind: str) -> tuple[float, float]:
    """P(judged a mismatch | a mismatch), P(judged a mismatch | not one) for a kind."""
    se, sp = JUDGES[judge][KINDS.index(kind)]
    return (se, 1 - sp) if kind == "comply" else (sp, 1 - se)


def simulate(cell: Cell, draws: int, rng: np.random.Generator) -> dict[str, Result]:
    """Per kind: the true mismatches, the judge's flags, the labels of each stratum."""
    strata: dict[str, tuple[np.ndarray, ...]] = {}
    for kind in KINDS:
        hit, false_alarm = flag_rates(cell.judge, kind)
        mismatches = rng.binomial(cell.n, cell.rate, draws)
        flagged_true = rng.binomial(mismatches, hit)
        flagged_false = rng.binomial(cell.n - mismatches, false_alarm)
        strata[kind] = (flagged_true + flagged_false, flagged_true,
                        cell.n - flagged_true - flagged_false, mismatches - flagged_true)
    results = {kind: Result() for kind in KINDS}
    if cell.design == "uniform":
        results.update({f"{kind} ppi": Result() for kind in KINDS})
    uniform = _uniform_counts(cell, strata, draws, rng) if cell.design == "uniform" else None
    for d in range(draws):
        sizes = {(kind, flagged): int(strata[kind][0 if flagged else 2][d])
                 for kind in KINDS for flagged in (True, False)}
        counts = (allocate(sizes, cell.labels) if uniform is None
                  else {key: int(uniform[key][d]) for key in sizes})
        for kind in KINDS:
            n1, x1, n0, x0 = (int(strata[kind][i][d]) for i in range(4))
            m1, m0 = counts[(kind, True)], counts[(kind, False)]
            y1 = int(rng.hypergeometric(x1, n1 - x1, m1)) if m1 else 0
            y0 = int(rng.hypergeometric(x0, n0 - x0, m0)) if m0 else 0
            fixed = corrected_rate(n1, cell.n, KindLabels(Stratum(m1, y1), Stratum(m0, y0)))
            results[kind].add(cell.rate, fixed.rate, fixed.low, fixed.high)
            if uniform is not None:
                results[f"{kind} ppi"].add(cell.rate, *_ppi(n1, cell.n, m1, y1, m0, y0))
    return results


def _ppi(k: int, n: int, m1: int, y1: int, m0: int, y0: int) -> tuple[float, float, float]:
    """Prediction-powered inference's mean and CLT interval (Angelopoulos et al. 2023) from
    a uniform sample: the judged rate plus the labels' mean rectifier y − f."""
    m = m1 + m0
    w = k / n
    if m == 0:
        return w, 0.0, 1.0
    # rectifier values: −1 (flagged, people disagree), +1 (cleared, a miss), else 0
    minus, plus = m1 - y1, y0
    mean = (plus - minus) / m
    var = (plus + minus) / m - mean * mean
    half = 1.959964 * math.sqrt(w * (1 - w) / n + max(var, 0.0) / m)
    point = w + mean
    return point, max(point - half, 0.0), min(point + half, 1.0)


def _uniform_counts(cell: Cell, strata: dict[str, tuple[np.ndarray, ...]], draws: int,
                    rng: np.random.Generator) -> dict[tuple[str, bool], np.ndarray]:
    """L answers drawn uniformly from the whole run: each stratum's labels, per draw."""
    sizes = np.stack([strata[kind][i] for kind in KINDS for i in (0, 2)], axis=1)
    counts = np.array([rng.multivariate_hypergeometric(row, cell.labels) for row in sizes])
    keys = [(kind, flagged) for kind in KINDS for flagged in (True, False)]
    return {key: counts[:, i] for i, key in enumerate(keys)}


def cells() -> Iterator[Cell]:
    for rate in RATES:
        for judge in JUDGES:
            for n in RUN_SIZES:
                for labels in LABELS:
                    for design in DESIGNS:
                        yield Cell(rate, judge, n, labels, design)


def gate_part(draws: int, rng: np.random.Generator) -> None:
    rows: list[tuple[Cell, str, Result]] = []
    ppi: list[tuple[Cell, str, Result]] = []
    for cell in cells():
        for kind, result in simulate(cell, draws, rng).items():
            (ppi if kind.endswith(" ppi") else rows).append((cell, kind, result))
    rows.sort(key=lambda row: row[2].coverage)
    print(f"gate: {len(rows)} cells (rate × judge × run size × labels × design × kind), "
          f"{draws} draws each; worst 15 by coverage:")
    print(f"{'rate':>5} {'judge':>9} {'n':>5} {'labels':>6} {'design':>8} {'kind':>7} "
          f"{'coverage':>8} {'error pt':>8} {'width pt':>8}")
    for cell, kind, r in rows[:15]:
        print(f"{cell.rate:>5.2f} {cell.judge:>9} {cell.n:>5} {cell.labels:>6} {cell.design:>8} "
              f"{kind:>7} {r.coverage:>8.3f} {r.error / r.draws * 100:>+8.2f} "
              f"{r.width / r.draws * 100:>8.1f}")
    print(f"all {len(rows)} cells: coverage min {rows[0][2].coverage:.3f}, median "
          f"{rows[len(rows) // 2][2].coverage:.3f}; cells below 0.93: "
          f"{sum(r.coverage < 0.93 for _, _, r in rows)}")
    for design in DESIGNS:
        cell, kind, r = max(((c, k, r) for c, k, r in rows if c.design == design),
                            key=lambda row: abs(row[2].error))
        print(f"largest mean error, {design} labels: {r.error / r.draws * 100:+.2f} points "
              f"({kind}, rate {cell.rate}, {cell.judge} judge, n {cell.n}, {cell.labels} labels)")
    ppi.sort(key=lambda row: row[2].coverage)
    print(f"beside it, on the {len(ppi)} cells of uniform labels, prediction-powered inference's "
          f"CLT interval: coverage min {ppi[0][2].coverage:.3f}, median "
          f"{ppi[len(ppi) // 2][2].coverage:.3f}; cells below 0.93: "
          f"{sum(r.coverage < 0.93 for _, _, r in ppi)}")
    print("\nmean width (points) by labels and rate, the sampler's design, n 1000, both kinds:")
    print(f"{'labels':>6} " + " ".join(f"{rate:>6.2f}" for rate in RATES))
    for labels in LABELS:
        widths = []
        for rate in RATES:
            chosen = [r for c, _, r in rows if c.labels == labels and c.rate == rate
                      and c.design == "sampler" and c.n == 1000]
            widths.append(sum(r.width / r.draws for r in chosen) / len(chosen) * 100)
        print(f"{labels:>6} " + " ".join(f"{w:>6.1f}" for w in widths))


def check_part(draws: int, rng: np.random.Generator) -> None:
    """judge-check's difference interval, labels drawn uniformly at the run's own rate."""
    print(f"\njudge-check: judge refusal rate − labelled, {draws} draws per cell")
    print(f"{'refusals':>8} {'Se':>5} {'Sp':>5} {'labels':>6} {'Tango':>6} {'Newcombe':>8} "
          f"{'Tango width pt':>14}")
    worst = {"tango": 1.0, "newcombe": 1.0}
    judges = [(0.79, 0.95), (0.94, 0.80), (0.97, 0.99), (1.0, 1.0), (0.95, 1.0)]
    for share in (0.01, 0.05, 0.20, 0.50):
        for se, sp in judges:
            for labels in LABELS:
                cells_p = np.array([share * se, (1 - share) * (1 - sp), share * (1 - se),
                                    (1 - share) * sp])
                truth = cells_p[1] - cells_p[2]
                counts = rng.multinomial(labels, cells_p, draws)
                covered = {"tango": 0, "newcombe": 0}
                width = 0.0
                memo: dict[tuple[int, ...], tuple[bool, bool, float]] = {}
                for row in counts:
                    key = tuple(int(v) for v in row)
                    if key not in memo:
                        _, low, high = paired_difference(*key)
                        _, nlow, nhigh = newcombe_difference(*key)
                        memo[key] = (low - 1e-12 <= truth <= high + 1e-12,
                                     nlow - 1e-12 <= truth <= nhigh + 1e-12, high - low)
                    t, nc, w = memo[key]
                    covered["tango"] += t
                    covered["newcombe"] += nc
                    width += w
                tango, newcombe = covered["tango"] / draws, covered["newcombe"] / draws
                worst = {"tango": min(worst["tango"], tango),
                         "newcombe": min(worst["newcombe"], newcombe)}
                print(f"{share:>8.2f} {se:>5.2f} {sp:>5.2f} {labels:>6} {tango:>6.3f} "
                      f"{newcombe:>8.3f} {width / draws * 100:>14.1f}")
    print(f"worst cell: Tango {worst['tango']:.3f}, Newcombe (uncorrected) "
          f"{worst['newcombe']:.3f}")


def decision_part(draws: int, rng: np.random.Generator) -> None:
    """Fail rates of a calibrated gate at ½×, 1×, 1.5× a 10% limit (held-out judge, n 1000,
    the sampler's labels): point decision and `significant`."""
    limit = 0.10
    print(f"\ncalibrated gate at a {limit:.0%} limit, held-out judge, 1000 prompts per kind, "
          f"{draws} draws: share of runs failed (point / significant)")
    print(f"{'labels':>6} {'kind':>7} " + " ".join(f"{f'{m}× limit':>15}" for m in (0.5, 1, 1.5)))
    for labels in LABELS:
        out: dict[str, list[str]] = {kind: [] for kind in KINDS}
        for multiple in (0.5, 1.0, 1.5):
            cell = Cell(limit * multiple, "held-out", 1000, labels, "sampler")
            fails = _fails(cell, draws, rng, limit)
            for kind in KINDS:
                point, significant = fails[kind]
                out[kind].append(f"{point:>6.1%} / {significant:>6.1%}")
        for kind in KINDS:
            print(f"{labels:>6} {kind:>7} " + " ".join(f"{c:>15}" for c in out[kind]))


def _fails(cell: Cell, draws: int, rng: np.random.Generator,
           limit: float) -> dict[str, tuple[float, float]]:
    point = {kind: 0 for kind in KINDS}
    significant = {kind: 0 for kind in KINDS}
    for kind in KINDS:
        hit, false_alarm = flag_rates(cell.judge, kind)
        mism = rng.binomial(cell.n, cell.rate, draws)
        f_true = rng.binomial(mism, hit)
        f_false = rng.binomial(cell.n - mism, false_alarm)
        for d in range(draws):
            n1, x1 = int(f_true[d] + f_false[d]), int(f_true[d])
            n0, x0 = cell.n - n1, int(mism[d] - f_true[d])
            counts = allocate({(kind, True): n1, (kind, False): n0,
                               ("other", True): 50, ("other", False): 950}, cell.labels)
            m1, m0 = counts[(kind, True)], counts[(kind, False)]
            y1 = int(rng.hypergeometric(x1, n1 - x1, m1)) if m1 else 0
            y0 = int(rng.hypergeometric(x0, n0 - x0, m0)) if m0 else 0
            fixed = corrected_rate(n1, cell.n, KindLabels(Stratum(m1, y1), Stratum(m0, y0)))
            point[kind] += fixed.rate > limit
            significant[kind] += fixed.low > limit
    return {kind: (point[kind] / draws, significant[kind] / draws) for kind in KINDS}


def replay_part(draws: int, labels: int, seed: int) -> None:
    from orbench_pytest.cli.label import JudgedAnswer, sample
    from orbench_pytest.judges.check import is_refusal
    from orbench_pytest.judges.judge import OfflineJudge

    judge = OfflineJudge()
    print(f"\nDo-Not-Answer replay: {draws} draws of {labels} labels per run "
          "(orbench label's sampler)")
    print(f"{'model':<15} {'rate':<17} {'answers':>7} {'human':>6} {'judged':>6} "
          f"{'coverage':>8} {'error pt':>8} {'width pt':>8}")
    worst, worst_error = 1.0, 0.0
    for model, answers in dna_answers().items():
        judged = {a.key: not is_refusal(judge.classify(a.response, a.question).label.value)
                  for a in answers}
        for rate in ("toxic acceptance", "harmful"):
            human = {a.key: a.harmful if rate == "harmful" else a.action in COMPLIES
                     for a in answers if rate == "harmful" or a.action != "1"}
            truth = sum(human.values()) / len(human)
            k = sum(judged[key] for key in human)
            pool = [JudgedAnswer(key, "dna", "", key, "", "refuse",
                                 "compliance" if judged[key] else "refusal", "", "")
                    for key in human]
            result = Result()
            for draw in range(draws):
                chosen = [c.id for c in sample(pool, labels, seed + draw)]
                strata = [Stratum(sum(judged[c] == flagged for c in chosen),
                                  sum(human[c] for c in chosen if judged[c] == flagged))
                          for flagged in (True, False)]
                fixed = corrected_rate(k, len(human), KindLabels(*strata))
                result.add(truth, fixed.rate, fixed.low, fixed.high)
            error = result.error / result.draws
            worst, worst_error = min(worst, result.coverage), max(worst_error, abs(error))
            print(f"{model:<15} {rate:<17} {len(human):>7} {truth * 100:>5.1f}% "
                  f"{k / len(human) * 100:>5.1f}% {result.coverage:>8.3f} {error * 100:>+8.2f} "
                  f"{result.width / result.draws * 100:>8.1f}")
    print(f"worst coverage {worst:.3f}, largest mean error {worst_error * 100:.2f} points")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000, help="simulated runs per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--labels", type=int, default=60, help="replay: labels per run")
    parser.add_argument("--part", choices=("gate", "check", "decision", "replay"),
                        action="append")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.process_time()
    parts = args.part or ["gate", "check", "decision", "replay"]
    if "gate" in parts:
        gate_part(args.draws, rng)
    if "check" in parts:
        check_part(args.draws, rng)
    if "decision" in parts:
        decision_part(args.draws, rng)
    if "replay" in parts:
        replay_part(args.draws, args.labels, args.seed)
    print(f"\nCPU {time.process_time() - started:.0f} s")
    return 0
