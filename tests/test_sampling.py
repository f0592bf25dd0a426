"""Stratified sampling: reproducible, proportional, every stratum represented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbench_pytest.catalog.sampling import allocate, parse_sample, sample_count, stratified_sample
from orbench_pytest.core.errors import ConfigError
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S

strata_lists = st.lists(st.sampled_from(["hate", "privacy", "self-harm", "illegal", "sexual",
                                         "violence", "a", "b"]), min_size=1, max_size=300)
sizes = st.one_of(st.integers(min_value=1, max_value=400),
                  st.floats(min_value=0.001, max_value=1.0, exclude_min=False))


# --------------------------------------------------------------------------- parse_sample

@pytest.mark.parametrize(("text", "value"), [
    ("200", 200), ("1", 1), (" 7 ", 7), ("0.1", 0.1), ("1.0", 1.0), ("10%", 0.1),
    ("100%", 1.0), (".5", 0.5), (25, 25), (0.25, 0.25)])
def test_parse_sample_accepts_counts_and_fractions(text: str, value: float) -> None:
    parsed = parse_sample(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("text", ["0", "-3", "0.0", "1.5", "150%", "abc", "", "nan", "inf",
                                  "None", True, 0])
def test_parse_sample_rejects_the_rest_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sample(text)
    message = str(info.value)
    assert message.startswith("--orbench-subset: ")
    assert "count N ≥ 1" in message and "fraction in (0, 1]" in message
    assert "\n" not in message


def test_parse_sample_names_another_key_when_asked() -> None:
    with pytest.raises(ConfigError, match=r"^sample\.n: "):
        parse_sample("x", name="sample.n")


def test_sample_count_rounds_fractions_half_up_and_keeps_one() -> None:
    assert sample_count(80_359, 0.1) == 8036
    assert sample_count(10, 0.25) == 3  # 2.5 rounds up
    assert sample_count(500, 0.0001) == 1
    assert sample_count(5, 200) == 5
    assert sample_count(0, 0.5) == 0


# --------------------------------------------------------------------------- stratified_sample

def test_a_known_sample_is_stable() -> None:
    """Pins the picks: a change here changes which prompts every user's seed selects."""
    strata = ["a"] * 6 + ["b"] * 3 + ["c"]
    picked = stratified_sample(strata, 5, seed=0)
    assert Counter(strata[i] for i in picked) == {"a": 3, "b": 1, "c": 1}
    assert picked == [0, 1, 5, 8, 9]
    assert stratified_sample([f"c{i % 10}" for i in range(100)], 10, seed=7) == [
        10, 26, 34, 38, 39, 41, 45, 72, 73, 77]


def test_the_same_sample_in_another_process_with_another_hash_seed() -> None:
    """`hash()` of str changes per process; the sample must not."""
    code = ("import json; from orbench_pytest.catalog.sampling import stratified_sample; "
            "strata = [f'cat{i % 7}' for i in range(5000)] + ['rare']; "
            "print(json.dumps(stratified_sample(strata, 300, 42)))")
    results = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S).stdout
        results.append(json.loads(out))
    strata = [f"cat{i % 7}" for i in range(5000)] + ["rare"]
    assert results[0] == results[1] == stratified_sample(strata, 300, 42)


@settings(max_examples=200, deadline=None)
@given(strata=strata_lists, size=sizes, seed=st.integers())
def test_same_inputs_same_ids(strata: list[str], size: float, seed: int) -> None:
    first = stratified_sample(strata, size, seed)
    assert first == stratified_sample(list(strata), size, seed)
    assert first == sorted(set(first))
    assert all(0 <= index < len(strata) for index in first)
    assert len(first) == sample_count(len(strata), size)


@settings(max_examples=300, deadline=None)
@given(strata=strata_lists, count=st.integers(min_value=1, max_value=400), seed=st.integers())
def test_strata_are_proportional_and_all_present(strata: list[str], count: int,
                                                  seed: int) -> None:
    picked = stratified_sample(strata, count, seed)
    sizes_ = Counter(strata)
    got = Counter(strata[i] for i in picked)
    n = len(picked)
    quotas = {name: n * size / len(strata) for name, size in sizes_.items()}
    if n >= len(sizes_):
        assert set(got) == set(sizes_)  # every stratum has at least one row
    if all(quota >= 1 for quota in quotas.values()) or n < len(sizes_):
        # No stratum needed topping up: largest remainder keeps everyone within one row.
        for name, quota in quotas.items():
            assert abs(got[name] - quota) < 1
    for name, size in sizes_.items():
        assert got[name] <= size


@settings(max_examples=200, deadline=None)
@given(sizes_=st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 50), min_size=1,
                              max_size=12),
       data=st.data())
def test_allocation_sums_to_the_count(sizes_: dict[str, int], data: st.DataObject) -> None:
    total = sum(sizes_.values())
    count = data.draw(st.integers(min_value=1, max_value=total))
    allocation = allocate(sizes_, count)
    assert sum(allocation.values()) == count
    assert all(0 <= allocation[name] <= sizes_[name] for name in sizes_)
    if count >= len(sizes_):
        assert all(allocation[name] >= 1 for name in sizes_)


@settings(max_examples=100, deadline=None)
@given(strata=strata_lists, small=st.integers(1, 200), extra=st.integers(0, 200),
       seed=st.integers())
def test_a_larger_sample_contains_the_smaller_one_per_stratum(
        strata: list[str], small: int, extra: int, seed: int) -> None:
    """Growing --orbench-subset keeps earlier picks, so their cached answers are reused."""
    smaller = stratified_sample(strata, small, seed)
    larger = set(stratified_sample(strata, small + extra, seed))
    allocation_small = Counter(strata[i] for i in smaller)
    allocation_large = Counter(strata[i] for i in larger)
    for index in smaller:
        if allocation_large[strata[index]] >= allocation_small[strata[index]]:
            assert index in larger


def test_different_seeds_pick_different_rows() -> None:
    strata = [f"c{i % 10}" for i in range(1000)]
    assert stratified_sample(strata, 100, 1) != stratified_sample(strata, 100, 2)


def test_a_tiny_stratum_is_kept_when_there_is_room() -> None:
    strata = ["big"] * 9991 + [f"tiny{i}" for i in range(9)]
    picked = stratified_sample(strata, 10, seed=3)
    assert Counter(strata[i] for i in picked) == {"big": 1, **{f"tiny{i}": 1 for i in range(9)}}


def test_80k_rows_sample_half_of_each_category() -> None:
    strata = [f"c{i % 10}" for i in range(80_359)]
    picked = stratified_sample(strata, 0.5, seed=0)
    assert len(picked) == len(set(picked)) == 40_180
    per_category = Counter(strata[i] for i in picked)
    assert len(per_category) == 10
    assert all(abs(count - strata.count(name) / 2) <= 1 for name, count in per_category.items())
