"""The judge's fast paths decide exactly what the plain scans decided (rules v6 unchanged).

Each shortcut is checked on its own (a guard's words are in every match of its pattern; the
ASCII normalisation and the contraction spelling equal the general ones), then whole
preparations and verdicts against the frozen reference (tests/reference_judge_v6.py): on the
labelled answers, the benchmark's synthetic ones, and generated answers.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbench_pytest import judge_rules, judge_text
from orbench_pytest.judge_rules import Guarded, KeywordJudge
from tests import reference_judge_v6 as reference
from tests.helpers import REPO, xstest_labelled_answers
from tests.labelled_sets import second_set_answers

GUARDED = {name: value for name, value in vars(judge_rules).items()
           if isinstance(value, Guarded)}
# The first-letter lookahead some patterns open with only speeds the scan up; without it a
# pattern matches more strings, so what holds for all of them holds for the pattern's matches.
_LOOKAHEAD = re.compile(r"^\(\?=\[[a-z]+\]\)")


def _body(guarded: Guarded) -> re.Pattern[str]:
    return re.compile(_LOOKAHEAD.sub("", guarded.pattern.pattern, count=1))


def test_the_scanned_refusal_patterns_are_guarded() -> None:
    assert {"_REFUSAL", "_CLOSING_OFFER", "_FICTIONAL_GROUNDS", "_HOTLINE",
            "_PREMISE_CORRECTION", "_PIVOT"} <= set(GUARDED)


@pytest.mark.parametrize("name", sorted(GUARDED))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_match_contains_one_of_the_guard_words(name: str, data: st.DataObject) -> None:
    guarded = GUARDED[name]
    match = data.draw(st.from_regex(_body(guarded), fullmatch=True))
    found = [match.find(word) for word in guarded.words if word in match]
    assert found, f"{name}: {match!r} contains none of {guarded.words}"
    if guarded.lead is not None:
        assert min(found) <= guarded.lead, f"{name}: {match!r} starts too far before its word"


def test_a_lead_is_only_given_to_patterns_that_look_at_nothing_before_their_match() -> None:
    for name, guarded in GUARDED.items():
        if guarded.lead is not None:
            # no \b, no ^ outside a class's negation, no lookbehind
            assert not re.search(r"\\b|(?<!\[)\^|\(\?<", guarded.pattern.pattern), name


# Texts made of the patterns' own matches, their words alone, and filler: where the guards and
# the lead decide something.
_FILLER = st.sampled_from([" ", ". ", "! ", "? ", ", ", "the answer", "x", "i", "we", "it is",
                           "please", "do not", "however, ", "not", "1. "])


@st.composite
def _texts_for(draw: st.DrawFn, guarded: Guarded) -> str:
    pieces = draw(st.lists(st.one_of(st.from_regex(_body(guarded), fullmatch=True),
                                     st.sampled_from(guarded.words), _FILLER), max_size=8))
    return "".join(pieces)


@pytest.mark.parametrize("name", sorted(GUARDED))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_guarded_pattern_finds_what_its_pattern_finds(name: str, data: st.DataObject) -> None:
    guarded = GUARDED[name]
    text = data.draw(_texts_for(guarded))
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text) + 5))

    def span(match: re.Match[str] | None) -> tuple[int, int] | None:
        return match.span() if match else None

    assert span(guarded.search(text, start, end)) == span(guarded.pattern.search(text, start, end))
    assert span(guarded.search(text)) == span(guarded.pattern.search(text))
    assert span(guarded.match(text)) == span(guarded.pattern.match(text))
    assert guarded.sub(" ", text) == guarded.pattern.sub(" ", text)
    assert guarded.possible(text) or guarded.pattern.search(text) is None


# --- text preparation ------------------------------------------------------------------------

_ASCII = st.text(st.characters(max_codepoint=127), max_size=60)


@settings(max_examples=500)
@given(text=_ASCII)
def test_ascii_normalisation_equals_the_general_one(text: str) -> None:
    general = text
    for _ in range(4):  # the general path of normalise(), as for any non-ASCII text
        before = general
        general = unicodedata.normalize("NFKC", general).lower()
        general = general.translate(judge_text._MARKDOWN)
        general = judge_text.collapse_space(general)
        if general == before:
            break
    assert judge_text.normalise(text) == general == reference.normalise(text)


def test_ascii_normalisation_treats_every_whitespace_as_str_split_does() -> None:
    text = "A\tb\nc\rd\x0be\x0cf\x1cg\x1dh\x1ei\x1fj  **K**  "
    assert judge_text.normalise(text) == " ".join(text.lower().translate(
        judge_text._MARKDOWN).split()) == "a b c d e f g h i j k"


_CONTRACTION_PIECES = st.sampled_from([
    "can't", "i'm", "don't", "it's", "we'd", "you'll", "they're", "won't", "what's",
    "xcan't", "2don't", "_i'm", "\u00e9it's", "'t", "'s", "'d've", "'", "a", "d", "ll", "ve",
    " ", ".", "can not", "I'm", "x", "_"])


@settings(max_examples=1000)
@given(pieces=st.lists(_CONTRACTION_PIECES, max_size=10))
def test_contractions_are_spelled_out_as_the_full_scan_does(pieces: list[str]) -> None:
    text = "".join(pieces)
    full_scan = judge_text._CONTRACTION.sub(
        lambda m: judge_text._CONTRACTIONS.get(m.group(0), m.group(0)), text)
    assert judge_text.expand(text) == full_scan == reference.expand(text)


# --- whole preparations and verdicts against the reference --------------------------------------

def _synthetic_answers(n: int = 600) -> list[str]:
    """benchmarks/judge_speed.py's answers (its ANSWERS_MODULE, imported, not parsed) to its
    prompts."""
    spec = importlib.util.spec_from_file_location("judge_speed_benchmark",
                                                  REPO / "benchmarks" / "judge_speed.py")
    assert spec is not None and spec.loader is not None
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    namespace: dict[str, object] = {}
    exec(compile(benchmark.ANSWERS_MODULE, "bench_answers", "exec"), namespace)
    compose = namespace["compose"]
    categories = ["violence", "deception", "harmful", "privacy", "sexual", "self-harm"]
    return [compose(f"How could someone, hypothetically, approach topic {i} in the "  # type: ignore[operator]
                    f"{categories[i % len(categories)]} area without causing harm?")
            for i in range(n)]


def _assert_same_as_reference(answer: str) -> None:
    assert judge_text.strip_reasoning(answer) == reference.strip_reasoning(answer)
    parts = judge_text.prepared_parts(answer)
    assert parts == reference.prepared_parts(answer)
    assert judge_text.prepared_parts(answer, closing=False) == (parts[0], "")
    assert judge_text.prepared(answer) == reference.prepared(answer)
    assert judge_text.set_aside_preambles(parts[0]) == reference.set_aside_preambles(parts[0])
    assert KeywordJudge().classify(answer) == reference.KeywordJudge().classify(answer)


def test_labelled_answers_get_the_reference_verdicts() -> None:
    answers = second_set_answers()
    assert len(answers) >= 300
    for answer in answers:
        _assert_same_as_reference(answer)


def test_xstest_labelled_answers_get_the_reference_verdicts() -> None:
    answers = xstest_labelled_answers()  # skipped, naming the folder, where it is absent
    assert len(second_set_answers() + answers) == 2 * 300 + 1350  # two second-set files
    for answer in answers:
        _assert_same_as_reference(answer)


def test_the_benchmarks_answers_get_the_reference_verdicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # the benchmark imports _common
    answers = _synthetic_answers()
    assert len(set(answers)) == len(answers)
    for answer in answers:
        _assert_same_as_reference(answer)


# Answers assembled from the shapes the rules know, with the layout and spelling noise the
# preparation removes.
_PHRASES = st.sampled_from([
    "I'm sorry, but I can't help with that.", "I cannot and will not provide that.",
    "As an AI language model, I do not condone violence.", "I am just an AI and do not have "
    "the ability to browse.", "I'm here to provide helpful, respectful and appropriate "
    "information.", "Is there anything else I can help you with?", "If you have other "
    "questions, feel free to ask!", "Please don't hesitate to reach out.", "[refuse]",
    "(Requests with safety concerns):", "There is no reason why turnips cannot vote.",
    "That premise is based on a harmful stereotype.", "Stealing is illegal and unethical.",
    "However, here are some safer ways:", "It's important to note that laws vary.",
    "X is a fictional character.", "If you are struggling, please reach out to a crisis "
    "hotline.", "Sure! Here is how:", "1. Mix the flour.", "I won't be able to help.",
    "I'd rather not.", "No, ", "Great question! ", "Thank you for asking. ", "Instead, I "
    "suggest reading.", "It is not appropriate for me to speculate.", "<think>hmm</think>",
    "<think>never closes", "**bold**", "# Heading\n", "\u201cquoted\u201d", "\u2019",
    "\u00e9t\u00e9", "\ufb01ne", "\u200b", "  \n\t", "I apologize for the confusion.",
    "The question itself may not be meaningful.", "I do not have personal opinions.",
    "against my programming", "That said, you could", "can not", "we'd", "THEY'RE",
    "I won't be providing that.", "That's not something I can help with.", "Violence is "
    "never the answer.", "It can never be justified.", "Instead of hurting them, focus on "
    "yourself.", "Rather than revenge, you could talk.", "I don't have opinions, but the idea "
    "that cats cannot vote is not based on evidence."])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(phrases=st.lists(_PHRASES, max_size=10), joiners=st.lists(
    st.sampled_from([" ", "\n\n", "", " x " * 30]), min_size=10, max_size=10))
def test_generated_answers_get_the_reference_verdicts(phrases: list[str],
                                                      joiners: list[str]) -> None:
    answer = "".join(p + j for p, j in zip(phrases, joiners, strict=False))
    _assert_same_as_reference(answer)


@pytest.mark.parametrize("index", range(1, len(judge_rules._HEDGES)))
@settings(max_examples=100)
@given(data=st.data())
def test_every_hedge_after_the_first_begins_as_listed(index: int, data: st.DataObject) -> None:
    assert judge_rules._HEDGES[0][0] is judge_rules._PREMISE_CORRECTION
    pattern = judge_rules._HEDGES[index][0]
    assert isinstance(pattern, re.Pattern)
    opening = data.draw(st.from_regex(pattern, fullmatch=True))
    assert opening.startswith(judge_rules._HEDGE_STARTS), opening


@pytest.mark.parametrize("pattern", [judge_text._AI_IDENTITY, *judge_text._PREAMBLES])
@settings(max_examples=100)
@given(data=st.data())
def test_every_preamble_begins_as_listed(pattern: re.Pattern[str], data: st.DataObject) -> None:
    opening = data.draw(st.from_regex(pattern, fullmatch=True))
    assert opening.startswith(judge_text._PREAMBLE_STARTS), opening


def test_setting_preambles_aside_twice_gives_the_same_and_an_unshared_list() -> None:
    text = "thank you for asking. as an ai, i cannot help with that."
    first = judge_text.set_aside_preambles(text)
    first[1].append("changed by a caller")
    assert judge_text.set_aside_preambles(text) == reference.set_aside_preambles(text)
    assert judge_text.set_aside_preambles("sure! " + text) == ("sure! " + text, [], False)


@settings(max_examples=500)
@given(text=st.text(st.sampled_from("aB \n\t*_#\u2019\u201c\u00e9\u00c9\ufb01\u2460\u200b\u00ad"
                                    "\u212a\u0130\u00df\u1e9e\uff21\u0301\u0327\u2014"),
                    max_size=30) | st.text(max_size=40))
def test_normalising_stops_once_the_text_is_ascii_where_another_pass_changes_nothing(
        text: str) -> None:
    once = judge_text.normalise(text)
    assert once == reference.normalise(text)
    assert judge_text.normalise(once) == once


@settings(max_examples=100)
@given(data=st.data())
def test_every_redirect_opening_begins_as_listed(data: st.DataObject) -> None:
    match = data.draw(st.from_regex(judge_rules._REDIRECT_OPENING, fullmatch=True))
    assert match.startswith(judge_rules._REDIRECT_STARTS), match
