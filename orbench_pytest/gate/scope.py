"""What a gate is decided over, given to it before it decides (never patched in after): how
much of each suite the run holds, the prompts a team disputes, and whether a partial gate fails
(--orbench-require-full).

A suite whose every prompt left in the run is disputed fails the gate whatever the options: a
pull request's disputed.yaml must not switch the gate off. Under --orbench-require-full a suite
fails when prompts were left out of the run, or when more of it is disputed than its
`max_disputed_share` (thresholds.yaml). Pure Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orbench_pytest.gate.thresholds import Thresholds

REQUIRE_FULL = "--orbench-require-full"


@dataclass(frozen=True)
class SuiteShare:
    """One suite of the run: its whole, what the run holds of it, and what is disputed."""

    suite: str
    whole: int  # its prompts as defined (its own sample) times the variants
    present: int  # its prompt items left in the run, the disputed among them
    disputed: int  # of those present
    max_disputed_share: float
    share_where: str  # where max_disputed_share came from, as messages name it

    @property
    def gated(self) -> int:
        return self.present - self.disputed


@dataclass(frozen=True)
class Scope:
    """The gate's scope. The default: a whole run with nothing disputed (a runner's own)."""

    suites: tuple[SuiteShare, ...] = ()
    narrowed_by: tuple[str, ...] = ()  # the options that left prompts out ("-k")
    require_full: bool = False
    disputed: tuple[tuple[str, str, str], ...] = ()  # (item label, reason, decided by)

    @property
    def partial(self) -> list[str]:
        """Suites gated on part of their prompts: "smoke: gated on 6 of 40 prompts (-k)"."""
        why = ", ".join(self.narrowed_by) or "selection"
        return [f"{s.suite}: gated on {s.gated:,} of {s.whole:,} prompts ({why})"
                for s in self.suites if s.present < s.whole and not _all_disputed(s)]

    def failures(self) -> list[str]:
        out = [f"{s.suite}: nothing left to gate: {s.disputed:,} of {s.present:,} disputed"
               for s in self.suites if _all_disputed(s)]
        if self.require_full:
            out.extend(f"{note} ({REQUIRE_FULL})" for note in self.partial)
            out.extend(f"{s.suite}: {s.disputed:,} of {s.whole:,} prompts disputed "
                       f"({_pct(s.disputed / s.whole)}) > {_pct(s.max_disputed_share)} "
                       f"({s.share_where}) ({REQUIRE_FULL})"
                       for s in self.suites if not _all_disputed(s) and s.whole
                       and s.disputed / s.whole > s.max_disputed_share)
        return out

    def notes(self) -> list[str]:
        """What the gate line adds that no failure says already."""
        out = [] if self.require_full else list(self.partial)
        if self.disputed:
            out.append(f"{len(self.disputed)} disputed")
        return out

    @property
    def nothing_gated(self) -> bool:
        """No prompt of any suite was left to gate (every one deselected)."""
        return bool(self.suites) and not any(s.gated for s in self.suites)


@dataclass(frozen=True)
class Ungated:
    """Why the gate does not decide a run: a shard run alone (--orbench-shard without
    --orbench-shard-gate). Its mismatches are tolerated and its rates only shown; the results
    file says so (`run.ungated`), so nothing reading it takes a shard's rates for a verdict."""

    shard: str  # "2/4"

    def __str__(self) -> str:
        return f"shard {self.shard} alone"

    def item_reason(self) -> str:
        return f"not gated: {self}"

    def gate_line(self) -> str:
        return (f"orbench gate: not computed on {self}: merge the shards' caches (orbench cache "
                "merge) and gate over them; --orbench-shard-gate gates this shard")


def _all_disputed(share: SuiteShare) -> bool:
    return share.present > 0 and share.disputed == share.present


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def scope_of(counts: Sequence[tuple[str, int, int, int]], thresholds: Thresholds,
             narrowed_by: Sequence[str], require_full: bool,
             disputed: Sequence[tuple[str, str, str]]) -> Scope:
    """`counts`: (suite, whole, present, disputed) of each suite of the run."""
    shares = tuple(
        SuiteShare(suite, whole, present, n_disputed,
                   thresholds.for_suite(suite).max_disputed_share,
                   thresholds.where(suite, "max_disputed_share"))
        for suite, whole, present, n_disputed in counts)
    return Scope(shares, tuple(narrowed_by), require_full, tuple(disputed))
