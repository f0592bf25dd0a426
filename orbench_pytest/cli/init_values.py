"""The values `orbench init` writes into committed files, and the writers it writes them with.

A value is one plain line: no line break (it would start a second setting), no control or
invisible character, no surrounding space, no key (a committed file is no place for one), and
for the workflow no `${{` (GitHub would evaluate it). Each file is made by a real writer
(configparser, tomli-w) and read back as pytest reads it before anything is written: a value
that would not read back whole is refused, never written changed.
"""

from __future__ import annotations

import configparser
import io
import sys
import unicodedata
from collections.abc import Mapping

import tomli_w
from iniconfig import IniConfig
from iniconfig.exceptions import ParseError

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import looks_like_key, url_secrets

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli before 3.11
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

__all__ = ["checked_value", "ini_text", "toml_text", "tomllib"]

INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})  # control, format, unassigned
FLAGS = {"orbench_model": "--model", "orbench_base_url": "--base-url"}  # in refusals
TOML_COMMENT = ("# orbench-pytest (orbench init): the model under test; thresholds.yaml is "
                "the gate\n")


def checked_value(option: str, value: str, *, workflow: bool = False) -> str:
    """`value` if it may be written into a committed file, else a one-line ConfigError."""
    if not value:
        raise ConfigError(f"{option}: empty; give a value")
    if value.splitlines() != [value]:
        raise ConfigError(f"{option}: must be one line (it holds a line break, which would "
                          "start another setting in the file)")
    odd = next((ch for ch in value if unicodedata.category(ch) in INVISIBLE), None)
    if odd is not None:
        raise ConfigError(f"{option}: holds a control or invisible character (U+{ord(odd):04X}); "
                          "give plain text")
    if value != value.strip():
        raise ConfigError(f"{option}: starts or ends with a space; give the value without it")
    if looks_like_key(value) or url_secrets(value):
        raise ConfigError(f"{option}: looks like it holds an API key or password, which would "
                          "be committed; give keys in the environment (OPENAI_API_KEY, a "
                          "repository secret in CI)")
    if workflow and "${{" in value:
        raise ConfigError(f"{option}: holds '${{{{', which GitHub Actions would evaluate as "
                          "an expression; give plain text")
    return value


def ini_text(header: str, settings: Mapping[str, str], name: str = "pytest.ini") -> str:
    """An ini section written by configparser, checked to read back whole by pytest's reader."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # names as given
    parser[header] = dict(settings)
    out = io.StringIO()
    parser.write(out)
    text = out.getvalue().rstrip("\n") + "\n"
    try:
        read = dict(IniConfig(name, data=text)[header].items())
    except (ParseError, KeyError):
        read = {}
    _same(read, settings, name)
    return text


def toml_text(settings: Mapping[str, str]) -> str:
    """The `[tool.pytest.ini_options]` table written by tomli-w, checked to read back whole."""
    text = tomli_w.dumps({"tool": {"pytest": {"ini_options": dict(settings)}}})
    _same(tomllib.loads(text)["tool"]["pytest"]["ini_options"], settings, "pyproject.toml")
    return TOML_COMMENT + text


def _same(read: Mapping[str, object], settings: Mapping[str, str], name: str) -> None:
    for option, value in settings.items():
        if read.get(option) != value:
            raise ConfigError(f"{FLAGS.get(option, option)}: would not read back from {name} "
                              "as given; give a plain value")
    if set(read) != set(settings):
        raise ConfigError(f"{name}: the settings would not read back as written; add them by "
                          "hand")
