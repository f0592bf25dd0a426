"""Issue 44 point 4: with a collection error anywhere (the user's own tests included), no
endpoint is asked and no gate is printed; the run says why in one line. Serial, under
--continue-on-collection-errors and under xdist, against the local server counting requests."""

from __future__ import annotations

import pytest

from tests.helpers import mini_suite, run_orbench
from tests.openai_server import OpenAIServer

WHY = ("*ERROR: orbench: no endpoint asked and no gate: 1 collection error (shown above); fix "
       "it and run again*")


@pytest.mark.parametrize("args", [(), ("--continue-on-collection-errors",),
                                  ("-n", "2", "-p", "no:randomly")],
                         ids=["serial", "continue-on-collection-errors", "xdist"])
def test_a_collection_error_anywhere_asks_nothing_and_prints_no_gate(
        pytester, plugin_args, args: tuple[str, ...]) -> None:
    mini_suite(pytester.path)
    (pytester.path / "test_broken.py").write_text("def test_x(:\n    pass\n")
    with OpenAIServer() as server:
        result = run_orbench(pytester, plugin_args, "test_broken.py", *args, url=server.url,
                             subprocess="-n" in args)
        assert server.requests == 0
    out = result.stdout.str() + result.stderr.str()
    assert "orbench gate" not in out
    assert "INTERNALERROR" not in out
    assert out.count("no endpoint asked") == 1
    result.stdout.fnmatch_lines([WHY])
    assert result.ret == pytest.ExitCode.INTERRUPTED
