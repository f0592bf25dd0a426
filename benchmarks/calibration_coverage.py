"""Does the calibrated gate's 95% interval cover the true rate about 95% of the time?

    python benchmarks/calibration_coverage.py [--runs 1000] [--seed 0]

A judge with known sensitivity and specificity labels synthetic answers. In each simulated run:
the gated prompts' true refusals are drawn at the true rate, the judge's verdicts are drawn
from its error rates, and a team labels a random sample of answers (its labelled refusals
and compliances judged by the same judge): calibration.correct then gives the corrected rate
and its interval, exactly as the gate computes them. Both gated rates are simulated
(over-refusal counts refusals; toxic acceptance counts answers, where the judge's roles swap).
Runs with too few labels to correct (calibration.MIN_LABELS) are counted apart.

Prints one row per scenario: coverage of the corrected interval, of the judge's raw Wilson
interval (what the gate reports without calibration), the mean widths, and the share of runs
left uncorrected. Pure Python, seeded: the same figures on every machine.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orbench_pytest.gate.calibration import ErrorRates, correct_check
from orbench_pytest.gate.decision import OVER_REFUSAL, TOXIC_ACCEPTANCE, RateCheck, wilson_interval


@dataclass(frozen=True)
class Scenario:
    rate: str  # OVER_REFUSAL or TOXIC_ACCEPTANCE
    truth: float  # the true over-refusal (or toxic acceptance) rate
    n: int  # gated prompts
    sensitivity: float  # P(judge says refusal | refusal)
    specificity: float  # P(judge says compliance | compliance)
    labels: int  # answers labelled by the team
    label_refusal_share: float  # share of refusals among the labelled answers


SCENARIOS = (
    Scenario(OVER_REFUSAL, 0.05, 300, 0.90, 0.95, 60, 0.5),
    Scenario(OVER_REFUSAL, 0.10, 300, 0.90, 0.95, 60, 0.5),
    Scenario(OVER_REFUSAL, 0.30, 300, 0.90, 0.95, 60, 0.5),
    Scenario(OVER_REFUSAL, 0.10, 1000, 0.85, 0.97, 60, 0.5),
    Scenario(OVER_REFUSAL, 0.10, 1000, 0.95, 0.90, 200, 0.4),
    Scenario(TOXIC_ACCEPTANCE, 0.05, 300, 0.90, 0.95, 60, 0.5),
    Scenario(TOXIC_ACCEPTANCE, 0.20, 300, 0.90, 0.95, 60, 0.5),
    Scenario(TOXIC_ACCEPTANCE, 0.10, 1000, 0.97, 0.85, 60, 0.5),
)


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


@dataclass
class Tally:
    runs: int = 0
    corrected: int = 0
    covered: int = 0
    raw_covered: int = 0
    width: float = 0.0
    raw_width: float = 0.0

    @property
    def coverage(self) -> float:
        return self.covered / self.corrected if self.corrected else float("nan")


def simulate(scenario: Scenario, runs: int, rng: random.Random) -> Tally:
    tally = Tally()
    se, sp = scenario.sensitivity, scenario.specificity
    for _ in range(runs):
        tally.runs += 1
        # the gated answers: over-refusal counts refusals, toxic acceptance counts answers
        true_refusals_share = (scenario.truth if scenario.rate == OVER_REFUSAL
                               else 1.0 - scenario.truth)
        refusals = _binomial(rng, scenario.n, true_refusals_share)
        judged_refusals = (_binomial(rng, refusals, se)
                           + _binomial(rng, scenario.n - refusals, 1.0 - sp))
        k = judged_refusals if scenario.rate == OVER_REFUSAL else scenario.n - judged_refusals
        # the team's labels
        labelled_refusals = _binomial(rng, scenario.labels, scenario.label_refusal_share)
        rates = ErrorRates(refusals=labelled_refusals,
                           caught=_binomial(rng, labelled_refusals, se),
                           compliances=scenario.labels - labelled_refusals,
                           passed=_binomial(rng, scenario.labels - labelled_refusals, sp))
        low, high = wilson_interval(k, scenario.n)
        tally.raw_covered += low <= scenario.truth <= high
        tally.raw_width += high - low
        if rates.too_few() is not None:
            continue
        check = RateCheck(scenario.rate, k, scenario.n, 0.1, "point", "", 0.95)
        corrected = correct_check(check, rates)
        tally.corrected += 1
        tally.covered += corrected.low <= scenario.truth <= corrected.high
        tally.width += corrected.high - corrected.low
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per scenario")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.process_time()
    print(f"{'rate':<17} {'truth':>5} {'n':>5} {'Se':>5} {'Sp':>5} {'labels':>6} "
          f"{'corrected cover':>15} {'width':>6} {'raw cover':>9} {'width':>6} {'uncorrected':>11}")
    total = Tally()
    for scenario in SCENARIOS:
        t = simulate(scenario, args.runs, rng)
        total.runs += t.runs
        total.corrected += t.corrected
        total.covered += t.covered
        print(f"{scenario.rate:<17} {scenario.truth:>5.2f} {scenario.n:>5} "
              f"{scenario.sensitivity:>5.2f} {scenario.specificity:>5.2f} {scenario.labels:>6} "
              f"{t.coverage:>15.3f} {t.width / max(t.corrected, 1):>6.3f} "
              f"{t.raw_covered / t.runs:>9.3f} {t.raw_width / t.runs:>6.3f} "
              f"{(t.runs - t.corrected) / t.runs:>11.3f}")
    print(f"all scenarios: {total.corrected} corrected runs of {total.runs}, coverage "
          f"{total.coverage:.3f} (nominal 0.95); CPU {time.process_time() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
