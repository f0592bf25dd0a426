"""Whether a cached answer may stand for the candidate: its age, the provider's fingerprint."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.freshness import (
    format_age,
    parse_max_age,
    probe_key,
    stale_keys,
    within_age,
)

DAY = 86400.0


@pytest.mark.parametrize(("raw", "seconds"), [
    (None, 30 * DAY), ("7d", 7 * DAY), ("12h", 12 * 3600.0), ("90m", 5400.0), ("45s", 45.0),
    ("2w", 14 * DAY), ("1.5d", 1.5 * DAY), ("0", 0.0), ("none", None), ("inf", None),
    (" 7D ", 7 * DAY),
])
def test_max_age_values(raw: str | None, seconds: float | None) -> None:
    assert parse_max_age(raw) == seconds


def test_the_default_is_thirty_days() -> None:
    assert parse_max_age(defaults.MAX_AGE) == 30 * DAY


@pytest.mark.parametrize("raw", ["7", "", "-1d", "d", "7 days", "1e3s", "nan", "7y"])
def test_a_bad_max_age_is_a_one_line_error_naming_the_option(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_max_age(raw)
    message = str(caught.value)
    assert message.startswith("--orbench-cache-max-age:") and "\n" not in message
    assert "none = no limit" in message


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "0s"), (59.9, "59s"), (60, "1m"), (3600, "1h"), (3660, "1h 1m"), (DAY, "1d"),
    (3 * DAY + 4 * 3600, "3d 4h"), (None, "no limit"),
])
def test_ages_read_as_people_say_them(seconds: float | None, shown: str) -> None:
    assert format_age(seconds) == shown


def answer(created: float | None, fingerprint: str | None = None) -> Response:
    return Response(text="ok", cached=True, created=created, system_fingerprint=fingerprint)


NOW = 1_800_000_000.0


def test_answers_at_or_over_the_max_age_are_not_reused() -> None:
    found = {"young": answer(NOW - 6 * DAY), "edge": answer(NOW - 7 * DAY),
             "old": answer(NOW - 40 * DAY), "unknown": answer(None)}
    assert set(within_age(found, 7 * DAY, NOW)) == {"young"}
    assert set(within_age(found, None, NOW)) == set(found)  # no limit: even unknown ages
    assert within_age(found, 0.0, NOW) == {}  # 0: never reuse


@given(st.lists(st.floats(min_value=0, max_value=100 * DAY), max_size=20),
       st.floats(min_value=0, max_value=100 * DAY))
def test_what_is_kept_is_exactly_what_is_younger_than_the_max_age(ages: list[float],
                                                                    max_age: float) -> None:
    found = {str(i): answer(NOW - age) for i, age in enumerate(ages)}
    kept = within_age(found, max_age, NOW)
    assert set(kept) == {str(i) for i, age in enumerate(ages) if NOW - (NOW - age) < max_age}


def test_the_probe_is_the_oldest_answer_that_carries_a_fingerprint() -> None:
    cached = {"a": answer(NOW - 5, "fp_1"), "b": answer(NOW - 9, "fp_1"),
              "c": answer(NOW - 99, None)}
    assert probe_key(cached) == "b"
    assert probe_key({"c": answer(NOW, None)}) is None
    assert probe_key({}) is None


def test_a_new_fingerprint_makes_every_answer_without_it_stale() -> None:
    cached = {"a": answer(NOW, "fp_1"), "b": answer(NOW, "fp_2"), "c": answer(NOW, None),
              "d": answer(NOW, "fp_3")}
    assert stale_keys(cached, "fp_3") == set()  # seen before: several backends at once
    assert stale_keys(cached, "fp_1") == set()
    assert stale_keys(cached, "fp_9") == {"a", "b", "c", "d"}
    assert stale_keys(cached, None) == set()  # nothing to compare: the age decides


@given(st.dictionaries(st.text(max_size=3), st.sampled_from([None, "x", "y", "z"]),
                       max_size=8),
       st.sampled_from([None, "x", "y", "z", "new"]))
def test_stale_answers_never_carry_the_fresh_fingerprint(fingerprints: dict[str, str | None],
                                                         fresh: str | None) -> None:
    cached = {key: answer(NOW, fp) for key, fp in fingerprints.items()}
    stale = stale_keys(cached, fresh)
    assert stale <= set(cached)
    assert all(cached[key].system_fingerprint != fresh for key in stale)
    known = set(fingerprints.values()) - {None}
    assert (stale == set()) == (fresh is None or fresh in known or not cached)
