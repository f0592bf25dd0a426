"""Argument types shared by the `orbench` subcommands (argparse, no pytest)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number >= 1, or argparse's one-line error naming the value."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value
