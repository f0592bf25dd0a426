"""xdist: the controller hands every item's state to its workers through one run-scoped file.

The controller, which collects nothing itself, finds the prompts behind the node ids the
workers collected (`selected_from_ids`), fetches and judges before any test is scheduled,
writes each item's state (keyed by node id) to a file in a private temporary folder named in
`workerinput`, and deletes the folder when its session ends. Workers only look their items up:
they never open the response cache, never judge, never compute a gate.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbench_pytest.core.artefacts import replacing
from orbench_pytest.core.errors import ConfigError

if TYPE_CHECKING:
    from orbench_pytest.catalog.collection import SuiteCatalog
    from orbench_pytest.config.settings import Variant
    from orbench_pytest.core.types import PromptCase
    from orbench_pytest.run.runner import ItemState, Selected

WORKERINPUT_KEY = "orbench_states"
FORMAT = 2  # 2: with the whole answer


def selected_from_ids(catalog: SuiteCatalog, variants: Sequence[Variant], rootpath: Path,
                      ids: Iterable[str]) -> list[Selected]:
    """The prompts behind the node ids the workers collected."""
    # Imported here: the session imports this module at start, before any suite runs.
    from orbench_pytest.catalog.collection import suite_entries
    from orbench_pytest.catalog.paths import names_suite_file
    from orbench_pytest.catalog.ready import ready_suite_dir
    from orbench_pytest.catalog.selection import suite_file_of
    from orbench_pytest.run.runner import Selected

    selected = []
    entries: dict[str, dict[str, tuple[PromptCase, Variant]]] = {}
    for nodeid in ids:
        if not names_suite_file(nodeid):
            continue
        path_part, _, name = nodeid.partition("::")
        if path_part not in entries:
            try:
                suite = catalog.load(suite_file_of(path_part, rootpath, ready_suite_dir()))
            except ConfigError:
                suite = None  # the workers report the collection error
            entries[path_part] = {} if suite is None else {
                item: (case, variant)
                for item, case, variant in suite_entries(suite, variants)}
        found = entries[path_part].get(name)
        if found is not None:
            selected.append(Selected(nodeid, *found))
    return selected


class StatesFile:
    """The controller's side. Its name is given to workers when they start; the private folder
    holding it is made only when a suite runs (an xdist run without suites makes nothing)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.gettempdir()) / f"orbench-run-{uuid.uuid4().hex}"

    @property
    def path(self) -> Path:
        return self._folder / "states.json"

    def write(self, states: Mapping[str, ItemState]) -> None:
        """Atomically, so a worker never reads half a file."""
        self._folder.mkdir(mode=0o700)
        rows = {nodeid: _row(state) for nodeid, state in states.items()}
        with replacing(self.path) as temporary, temporary.open("w", encoding="utf-8") as handle:
            json.dump({"format": FORMAT, "states": rows}, handle, ensure_ascii=False,
                      separators=(",", ":"))

    def delete(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def read_states(path: Path) -> dict[str, ItemState]:
    """A worker's side: every item's state, as the controller decided it."""
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}  # the controller ran no fetch phase (it stopped first)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: the run's item states are unreadable ({exc})") from None
    if data.get("format") != FORMAT:
        raise ConfigError(f"{path}: item states of another orbench-pytest version")
    return {nodeid: _state(row) for nodeid, row in data["states"].items()}


def _row(state: ItemState) -> list[Any]:
    answer, verdict, result = state.answer, state.answer.verdict, state.result
    return [state.outcome.value, state.reason,
            verdict.label.value, verdict.reason, verdict.judge, verdict.confident,
            answer.excerpt, answer.latency_ms, answer.cached, answer.attempts,
            result.suite, result.category, result.expect, result.refused, result.variant,
            result.baseline.value, result.refusals, result.answered, result.baseline_rate,
            answer.text]


def _state(row: list[Any]) -> ItemState:
    from orbench_pytest.core.types import Label, Verdict
    from orbench_pytest.gate.baseline import Pairing
    from orbench_pytest.gate.decision import ItemResult, Outcome
    from orbench_pytest.judges.verdicts import Answer
    from orbench_pytest.run.runner import ItemState

    (outcome, reason, label, verdict_reason, judge, confident, excerpt, latency_ms, cached,
     attempts, suite, category, expect, refused, variant, baseline, refusals, answered,
     baseline_rate, text) = row
    verdict = Verdict(Label(label), verdict_reason, judge, confident)
    answer = Answer(verdict, excerpt, latency_ms, cached, attempts, text=text)
    result = ItemResult(suite, category, expect, refused, variant, Pairing(baseline),
                        refusals, answered, baseline_rate)
    return ItemState(answer, Outcome(outcome), reason, result)
