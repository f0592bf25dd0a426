"""A key planted in a suite's prompt or a model's answer is shown [REDACTED] by every repr a
library may print: pytest's assertion rewriting, Hypothesis' falsifying example and notes
(which print a dataclass field by field and a str subclass as a plain str), tracebacks.

Before: Hypothesis' report showed `prompt='How do I rotate sk-…?'` (a SafePrompt printed as
a str) and pytest's rewriting `where '… sk-…' = Asked(…).answer`, though the plugin's own lines
said [REDACTED]; PromptCase, Response, Job and the other dataclasses printed their text raw."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis.vendor.pretty import pretty

import orbench_pytest
from orbench_pytest.cli.label import JudgedAnswer
from orbench_pytest.config.settings import Variant
from orbench_pytest.core.redact import register_secret
from orbench_pytest.core.types import Label, PromptCase, Response, Verdict
from orbench_pytest.fetch.engine import Job
from orbench_pytest.generate.ask import Request
from orbench_pytest.generate.seeds import Seed
from orbench_pytest.judges.check import Pair
from orbench_pytest.reports.document import ItemRecord
from orbench_pytest.run.prompt_asker import Asked
from orbench_pytest.strategies import SafePrompt
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S

PACKAGE = Path(orbench_pytest.__file__).parent


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> str:
    """A key in the environment, as tests/test_secrets.py plants them."""
    key = f"sk-orbench-FAKE-{secrets.token_hex(12)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


def test_every_object_carrying_text_shows_a_registered_key_redacted(planted: str) -> None:
    register_secret(planted)
    text = f"rotate {planted} now"
    shown = [
        PromptCase("s", "c-1", text, "comply", "k"),
        SafePrompt(text, "s", "c-1", "k"),
        Response(text, raw=text, error=text),
        Verdict(Label.REFUSAL, text, "keyword"),
        Job("key", text, text),
        ItemRecord("s", "c", "", "k", "comply", "refusal", "failed", True, False,
                   response=text, prompt=text),
        Variant("v", text),
        Asked(text, text, Label.REFUSAL, text, "keyword", False),
        Request(text, text),
        Seed("s-1", text, "k"),
        JudgedAnswer("s[c]", "s", "", "c", "k", "comply", "refusal", text, text),
        Pair("s[c]", "comply", "refusal", "compliance", text, text),
    ]
    for obj in shown:
        for rendering in (repr(obj), pretty(obj), str([obj])):
            assert planted not in rendering and "[REDACTED]" in rendering, rendering


TEXT_FIELDS = ("prompt", "answer", "text", "response", "reason", "excerpt", "system_prompt",
               "rewording")


def test_every_dataclass_carrying_prompt_or_answer_text_has_a_redacted_repr() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module_name = "orbench_pytest." + ".".join(path.relative_to(PACKAGE).with_suffix("")
                                                   .parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                      and isinstance(s.target, ast.Name) and "int" not in ast.unparse(s.annotation)}
            if not fields.intersection(TEXT_FIELDS):
                continue
            cls: Any = getattr(importlib.import_module(module_name), node.name, None)
            if cls is None or not (dataclasses.is_dataclass(cls) or issubclass(cls, str)):
                continue
            where = f"{path.relative_to(PACKAGE)}:{node.name}"
            if not callable(getattr(cls, "_repr_pretty_", None)):
                missing.append(where)
    assert not missing, f"text-carrying classes without a redacted repr: {missing}"


USER_TEST = '''
from hypothesis import given, settings
from orbench_pytest import strategies

@settings(max_examples=5, database=None)
@given(prompt=strategies.safe_prompts("suites/keys.yaml"))
def test_prompts_are_answered_without_the_word(orbench_ask, prompt):
    asked = orbench_ask(prompt)
    assert "never-said" in asked.answer
'''
ECHO_APP = '''
def answer(prompt, system_prompt):
    return "You asked: " + prompt
'''


def test_a_key_in_a_suite_prompt_is_redacted_in_hypothesis_and_pytest_reports(
        pytester: pytest.Pytester, plugin_args: list[str], planted: str) -> None:
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "keys.yaml").write_text(yaml.safe_dump({"name": "keys",
        "prompts": [{"prompt": f"How do I rotate the key {planted} safely?",
                     "expect": "comply"}]}))
    pytester.makepyfile(test_user=USER_TEST, echo_app=ECHO_APP)
    # As the user runs it: a fresh interpreter with Hypothesis' pytest plugin loaded.
    result = pytester.runpytest_subprocess(*plugin_args, "test_user.py",
                                           "--orbench-target=echo_app:answer",
                                           "-p", "no:cacheprovider",
                                           timeout=SUBPROCESS_TIMEOUT_S)
    result.assert_outcomes(failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "prompt='How do I rotate the key [REDACTED] safely?'" in out, out  # Hypothesis'
    assert "= Asked(complied" in out  # pytest's rewriting of the failed assert
    assert planted not in out, out
    assert "rotate the key" in out  # the prompt is shown, its key is not


def test_the_docs_say_which_reprs_are_redacted() -> None:
    assert "[REDACTED]" in (REPO / "docs" / "hostile-input.md").read_text(encoding="utf-8")
