"""The option table is the one place an option is defined: each row's parser and default give
exactly one Settings field, and the settings stay split into small groups."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from orbench_pytest.config.options import (
    COMMAND_LINE,
    OPTIONS,
    Option,
    deprecated_spellings,
    read_options,
    shown_default,
)
from orbench_pytest.config.settings import DERIVED, GROUPS, Settings, build_settings
from orbench_pytest.core.errors import ConfigError

MAX_FIELDS = 20  # issue 45: no settings object has more than 20 fields
HERE = Path("/nowhere")
WITH_DEFAULT = [option for option in OPTIONS if option.default is not None]


def settings_fields() -> list[str]:
    return [f"{group.name}.{field.name}" for group in dataclasses.fields(Settings)
            for field in dataclasses.fields(GROUPS[group.name])]


def test_every_settings_field_comes_from_exactly_one_row_or_one_cross_option_function() -> None:
    given_by = Counter(option.to for option in OPTIONS if option.to) + Counter(DERIVED)
    assert set(given_by) == set(settings_fields())
    assert [name for name, count in given_by.items() if count != 1] == []


def test_no_settings_object_has_more_than_20_fields() -> None:
    sizes = {cls.__name__: len(dataclasses.fields(cls)) for cls in (Settings, *GROUPS.values())}
    assert max(sizes.values()) <= MAX_FIELDS, sizes
    assert all(dataclasses.fields(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
               for cls in (Settings, *GROUPS.values()))


@pytest.mark.parametrize("option", WITH_DEFAULT, ids=lambda option: option.flag)
def test_a_rows_default_is_a_value_its_parser_takes_and_its_help_shows(option: Option) -> None:
    """The default is written once, as a user would type it: the parser takes it, and the
    help's "(default: …)" parses to the same value."""
    value = option.parse(option.default, option.flag, HERE)
    assert value is not None
    assert option.parse(shown_default(option.default), option.flag, HERE) == value
    if "{default}" in option.help:
        assert f"default: {shown_default(option.default)}" in option.text
    assert "{default}" not in option.text


def test_a_row_without_a_default_is_unset_when_not_given() -> None:
    settings = build_settings({}, env={})
    for option in OPTIONS:
        if option.to and option.default is None and option.to not in (
                "target.base_url", "judge.api_key_env", "cache.path", "scope.data_dirs"):
            group, name = option.to.split(".")
            assert getattr(getattr(settings, group), name) in (None, False, ()), option.flag


@given(st.sets(st.sampled_from(WITH_DEFAULT)))
def test_giving_any_rows_default_explicitly_changes_no_setting(chosen: set[Option]) -> None:
    """Typing a default (as the help shows it) is the same as leaving the option out (but for
    judge.given, which records that --orbench-judge was typed)."""
    values = {option.dest: shown_default(option.default) for option in chosen}
    typed = build_settings(values, env={}, invocation_dir=HERE)
    unset = build_settings({}, env={}, invocation_dir=HERE)
    assert typed.judge.given == ("orbench_judge" in values)
    assert dataclasses.replace(typed, judge=dataclasses.replace(typed.judge, given=False)) == unset


@given(st.sampled_from([option for option in OPTIONS if option.to]), st.text(max_size=20))
# Found by the property: a NUL in a folder option (a TOML "\u0000") raised ValueError.
@example(next(option for option in OPTIONS if option.flag == "--orbench-data-dir"), "\x00")
def test_any_text_given_to_a_row_parses_or_is_a_one_line_error_naming_it(
        option: Option, raw: str) -> None:
    try:
        option.parse([raw] if option.kind == "list" else raw, option.flag, HERE)
    except ConfigError as exc:
        assert str(exc).startswith(option.flag) and "\n" not in str(exc)


def test_an_old_spelling_is_located_at_the_users_command_line_or_ini_line(
        tmp_path: Path) -> None:
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\naddopts = -q\norbench_seed = 4\n")
    keys = {"orbench_seed": "4"}
    found = deprecated_spellings({"orbench_sample": "3"}, lambda key: keys.get(key), ini)
    assert [(f.filename, f.lineno) for f in found] == [(COMMAND_LINE, 0), (str(ini), 3)]
    assert found[0].message.startswith("--orbench-sample (command line) is deprecated")
    assert found[1].message.startswith("pytest.ini: orbench_seed is deprecated")
    assert found[1].message.endswith("use orbench_random_seed")


@pytest.mark.parametrize(("typed", "named"), [("orbench_seed", "--orbench-seed"),
                                              ("orbench_random_seed", "--orbench-random-seed"),
                                              ("orbench_sample", "--orbench-sample")])
def test_an_error_names_the_spelling_the_user_typed(typed: str, named: str) -> None:
    """A bad value given in an option's old spelling is an error naming that spelling: the
    run stops before the deprecation warning could say what it became."""
    for command_line, ini in (({typed: "-1"}, {}), ({}, {typed: "-1"})):
        values = read_options(command_line, ini.get, None)
        with pytest.raises(ConfigError, match=f"^{named}: '?-1'? is not"):
            build_settings(values, env={})
