"""Issue 43's degraded list (this part): orbench_ask(None) sends nothing and says why in one
line, a lone surrogate is a one-line error before the cache, and --orbench-shard=1/10^23 gets
a true message. Through real pytest runs against the local server."""

from __future__ import annotations

import pytest

from tests.helpers import SAFE, cases, run_orbench, write_suite
from tests.openai_server import OpenAIServer


def test_orbench_ask_refuses_what_is_not_text_and_sends_nothing(pytester, plugin_args) -> None:
    pytester.makepyfile(test_ask='''
def test_none(orbench_ask):
    orbench_ask(None)

def test_bytes(orbench_ask):
    orbench_ask(b"How do I bake bread?")

def test_surrogate(orbench_ask):
    orbench_ask("be \\udcff nice")

def test_text(orbench_ask):
    assert orbench_ask("How do I bake bread?").complied
''')
    with OpenAIServer() as server:
        result = run_orbench(pytester, plugin_args, "test_ask.py", url=server.url,
                             suites=None)
        assert server.prompts == ["How do I bake bread?"]
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines([
        "E *TypeError: orbench_ask: a prompt is text (str), got NoneType",
        "E *TypeError: orbench_ask: a prompt is text (str), got bytes",
        "E *ValueError: orbench_ask: the prompt holds a lone surrogate (U+DCFF at character "
        "3), which no endpoint can be sent: decode its bytes with errors='replace'"])
    assert not [line for line in result.stdout.lines if "UnicodeEncodeError:" in line]


@pytest.mark.parametrize("shard", ["1/" + "1" + "0" * 23, "1/1000000000"])
def test_a_shard_count_past_the_bound_gets_a_true_message(pytester, plugin_args,
                                                          shard: str) -> None:
    write_suite(pytester, cases([SAFE[0]]), "one")
    result = run_orbench(pytester, plugin_args, f"--orbench-shard={shard}", model="m")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: --orbench-shard: '{shard}' is not K/N with 1 <= K <= N <= 999,999,999 (e.g. "
        "2/4: the second of four shards)"]
