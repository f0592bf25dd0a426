"""Hypothesis strategies over safe prompts and their rewordings.

    from hypothesis import given
    from orbench_pytest import strategies
    @given(prompt=strategies.safe_prompts("smoke").flatmap(strategies.rewordings))
    def test_rewordings_are_answered(orbench_ask, prompt):
        assert orbench_ask(prompt).complied

`safe_prompts(suite, category=None)` draws the prompts a suite expects answered (never its
toxic ones), from a ready suite's name or a suite file's path. `rewordings(prompt)` draws a
list of edits (rewording_edits.py: whitespace, punctuation, case, typo, synonym, framing,
purpose, persona; at most one framing, purpose and persona) and applies them in order. The
empty list is the original prompt, and each
edit is (transformation, choice) with the transformations ordered from the smallest change to
the largest and the choice a whole number: Hypothesis' shrinker deletes edits, moves each
toward an earlier transformation and a smaller choice, so a failure is reported as the fewest,
smallest edits that still make the model refuse.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

try:
    from hypothesis import strategies as st
except ImportError as exc:  # an optional dependency
    raise ImportError("orbench_pytest.strategies needs Hypothesis: "
                      "pip install 'orbench-pytest[rewordings]'") from exc

from orbench_pytest.catalog.rewording_edits import (
    ONCE,
    TRANSFORMS,
    Edit,
    Rewording,
    Transform,
    choices,
)
from orbench_pytest.core.untrusted import redacted_repr

DEFAULT_MAX_EDITS = 3


@redacted_repr
class SafePrompt(str):
    """A suite's prompt that expects an answer, with where it comes from."""

    suite: str
    case_id: str
    category: str

    def __new__(cls, text: str, suite: str, case_id: str, category: str) -> SafePrompt:
        made = super().__new__(cls, text)
        made.suite, made.case_id, made.category = suite, case_id, category
        return made


def load_safe_prompts(suite: str, category: str | None = None,
                      base: Path | None = None) -> list[SafePrompt]:
    """The prompts of `suite` (a ready suite's name or a suite file) that expect an answer,
    in file order; ValueError when there are none (a mistyped category)."""
    from orbench_pytest.catalog.ready import ready_suite_dir, resolve_suite
    from orbench_pytest.catalog.suites import SuiteOptions, load_suite
    from orbench_pytest.core.defaults import data_dirs_from_env

    path = resolve_suite(suite, base or Path.cwd(), option="safe_prompts")
    options = SuiteOptions(data_dirs=data_dirs_from_env(os.environ),
                           ready_suite_dir=ready_suite_dir())
    loaded = load_suite(path, options)
    found = [SafePrompt(case.prompt, loaded.name, case.case_id, case.category)
             for case in loaded.cases
             if case.expect == "comply" and (category is None or case.category == category)]
    if not found:
        where = f" in category {category!r}" if category is not None else ""
        raise ValueError(f"safe_prompts: suite {loaded.name!r} has no safe prompt{where} "
                         f"(categories: {', '.join(loaded.categories)})")
    return found


def safe_prompts(suite: str, category: str | None = None) -> st.SearchStrategy[SafePrompt]:
    """The safe prompts of a suite (loaded at the first draw, not at import); shrinks toward
    the suite's first safe prompt."""
    return st.deferred(lambda: st.sampled_from(load_safe_prompts(suite, category)))


def edits(prompt: str, transforms: Sequence[Transform] = TRANSFORMS,
          max_edits: int = DEFAULT_MAX_EDITS) -> st.SearchStrategy[list[Edit]]:
    """Lists of at most `max_edits` edits of `prompt`; the empty list (no edit) is the simplest.
    Each edit's choice is drawn below the number of edits its transformation offers the prompt
    (rewording_edits.choices), so shrinking moves among real candidates; transformations with
    nothing to offer it (no listed synonym) are left out. At most one framing, one purpose and
    one persona: "I'm a parent. I'm a student." is no way anyone asks."""
    offered = [(t, choices(t, prompt)) for t in transforms]
    offered = [(t, n) for t, n in offered if n > 0]
    if not offered:
        raise ValueError("edits: no transformation offers an edit of this prompt")
    # one_of shrinks toward its first branch: the smallest change.
    one = st.one_of([st.builds(Edit, st.just(t), st.integers(min_value=0, max_value=n - 1))
                     for t, n in offered])
    return st.lists(one, max_size=max_edits, unique_by=_once_key)


def _once_key(edit: Edit) -> object:
    """The same key for every edit of a transformation used once (ONCE), a key of its own for
    each other edit."""
    return edit.name if edit.name in ONCE else edit


def rewordings(prompt: str, transforms: Sequence[Transform] = TRANSFORMS,
               max_edits: int = DEFAULT_MAX_EDITS) -> st.SearchStrategy[Rewording]:
    """Rewordings of `prompt` made of at most `max_edits` edits drawn from `transforms` (any
    functions `(prompt, choice) -> prompt`, smallest change first); shrinks toward `prompt`."""
    return edits(prompt, transforms, max_edits).map(lambda drawn: Rewording(prompt, drawn))
