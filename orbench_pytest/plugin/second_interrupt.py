"""A second Ctrl-C while an interrupted run finishes ends the process at once, with one line.

After the first Ctrl-C pytest and its plugins still finish: our results file, pytest's JUnit
XML and summaries, Hypothesis' own hooks. A second Ctrl-C in that time would raise
KeyboardInterrupt wherever it lands and print that place's traceback; a user pressing it
again means "stop now". The process then exits with pytest's INTERRUPTED status, without the
reports it was still writing (each is replaced whole, so none is left half-written), and the
embedded model's server follows its parent out (it ends when its stdin closes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

import pytest

LINE = "orbench: interrupted again: stopped at once (this run's reports were not written)"


def stop_at_second_interrupt() -> Callable[[], None]:
    """SIGINT now ends the process at once; returns how to put the previous handler back.
    Only the main thread may set a handler: elsewhere (a run inside a thread) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, _stop)

    def restore() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)

    return restore


def _stop(signum: int, frame: FrameType | None) -> None:
    with contextlib.suppress(Exception):  # a closed or broken stream must not stop the stop
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"\n{LINE}\n")
        sys.stderr.flush()
    os._exit(pytest.ExitCode.INTERRUPTED)
