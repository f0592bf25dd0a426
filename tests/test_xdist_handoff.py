"""The states file the xdist controller hands its workers: what goes in comes back out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Label, Verdict
from orbench_pytest.gate.baseline import Pairing
from orbench_pytest.gate.decision import ItemResult, Outcome
from orbench_pytest.judges.verdicts import Answer
from orbench_pytest.run.runner import ItemState
from orbench_pytest.run.xdist_handoff import StatesFile, read_states

text = st.text(max_size=40)
states = st.builds(
    ItemState,
    answer=st.builds(Answer, verdict=st.builds(Verdict, st.sampled_from(Label), text, text,
                                               st.booleans()),
                     excerpt=text, latency_ms=st.floats(0, 1e6), cached=st.booleans(),
                     attempts=st.integers(0, 9)),
    outcome=st.sampled_from(Outcome), reason=text,
    result=st.builds(ItemResult, text, text, st.sampled_from(["comply", "refuse"]),
                     st.one_of(st.none(), st.booleans()), text, st.sampled_from(Pairing)))


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(text, states, max_size=5))
def test_states_round_trip(by_nodeid) -> None:
    handoff = StatesFile()
    try:
        handoff.write(by_nodeid)
        assert read_states(handoff.path) == by_nodeid
    finally:
        handoff.delete()
    assert not handoff.path.parent.exists()


def test_no_file_means_no_states_and_a_bad_one_a_clear_error(tmp_path) -> None:
    assert read_states(tmp_path / "missing.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json: the run's item states are unreadable"):
        read_states(tmp_path / "bad.json")
