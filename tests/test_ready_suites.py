"""Pure parts of using the plugin in a project: ready suites by name, the option reader (ini
twins), which YAML files are suites, the model choice, the unsampled-suite guard."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orbench_pytest.catalog.ready import ready_suite_dir, ready_suites, resolve_suite
from orbench_pytest.catalog.selection import (
    is_requested_suite,
    named_suite_files,
    node_path,
    suite_request,
)
from orbench_pytest.catalog.suites import UNSAMPLED_LIMIT, SuiteOptions, load_suite
from orbench_pytest.cli.main import main
from orbench_pytest.config.model_choice import choose_model
from orbench_pytest.config.options import OPTIONS, read_options
from orbench_pytest.config.settings import build_settings
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.gate.thresholds import load_thresholds


def test_orbench_suites_lists_names_and_sizes(capsys) -> None:
    assert main(["suites"]) == 0
    out = capsys.readouterr().out
    for name, size in (("smoke", "40"), ("or-bench-80k", "80,359"),
                       ("or-bench-hard-1k", "1,319"), ("or-bench-toxic", "655"),
                       ("xstest", "450"), ("coconot-contrast", "379"),
                       ("coconot-unsafe", "395")):
        assert any(line.split()[:2] == [name, size] for line in out.splitlines()), name
    assert main(["suites", "--thresholds"]) == 0
    assert capsys.readouterr().out == (ready_suite_dir() / "thresholds.yaml").read_text()


def test_the_starter_thresholds_gate_the_ready_suites_only() -> None:
    starter = load_thresholds(ready_suite_dir() / "thresholds.yaml")
    assert set(starter.suites) <= {suite.name for suite in ready_suites()}
    assert starter.suites["or-bench-hard-1k"].decision == "significant"


def test_a_name_is_a_ready_suite_and_anything_else_a_path(tmp_path: Path) -> None:
    assert resolve_suite("xstest", tmp_path) == ready_suite_dir() / "xstest.yaml"
    (tmp_path / "xstest").mkdir()  # a name wins over a folder of the same name
    assert resolve_suite("xstest", tmp_path) == ready_suite_dir() / "xstest.yaml"
    assert resolve_suite("xstest/", tmp_path) == tmp_path / "xstest"
    with pytest.raises(ConfigError, match=r"'smok' is neither a ready suite \(coconot-contrast, "):
        resolve_suite("smok", tmp_path)


# --------------------------------------------------------------------------- options

def ini(values: dict[str, object]):
    return lambda name: values.get(name)  # as pytest: a value key unset is None


def test_the_command_line_overrides_the_ini_and_ini_paths_follow_the_ini_file() -> None:
    base = Path("/project")
    values = read_options(
        {"orbench_model": "cli-model", "orbench_thresholds": None, "orbench_strict": None},
        ini({"orbench_model": "ini-model", "orbench_thresholds": "gate/t.yaml",
             "orbench_strict": True, "orbench_suites": ["smoke", "more/x.yaml"],
             "orbench_data_dir": ["data/a", "/abs/b"], "orbench_variant": ["v=@p.txt", "w=hi"],
             "orbench_system_prompt": ["@sp.txt"]}), base)
    assert values["orbench_model"] == "cli-model"
    assert values["orbench_thresholds"] == "/project/gate/t.yaml"
    assert values["orbench_strict"] is True
    assert values["orbench_suite"] == ["smoke", "/project/more/x.yaml"]
    assert values["orbench_data_dir"] == ["/project/data/a", "/abs/b"]
    assert values["orbench_variant"] == ["v=@/project/p.txt", "w=hi"]
    assert values["orbench_system_prompt"] == ["@/project/sp.txt"]
    assert values["orbench_cache"] is None
    assert set(values) == {option.dest for option in OPTIONS}


def test_every_option_reaches_the_settings_under_its_name(tmp_path: Path) -> None:
    """The option table and build_settings agree on every dest name."""
    (tmp_path / "d1").mkdir()  # data folders are only read: they must exist
    (tmp_path / "d2").mkdir()
    values = read_options({}, ini({"orbench_model": "m", "orbench_data_dir": ["d1", "d2"]}),
                          tmp_path)
    settings = build_settings(values, env={}, invocation_dir=Path("/elsewhere"))
    assert settings.target.model == "m"
    assert settings.scope.data_dirs == (tmp_path / "d1", tmp_path / "d2")
    env = {"ORBENCH_DATA_DIR": "/a:/b"}
    assert build_settings({}, env=env).scope.data_dirs == (Path("/a"), Path("/b"))


# --------------------------------------------------------------------------- suite selection

def test_only_yaml_files_asked_for_are_suites(tmp_path: Path) -> None:
    (tmp_path / "suites" / "deeper").mkdir(parents=True)
    for name in ("suites/a.yaml", "suites/deeper/b.yaml", "c.yaml"):
        (tmp_path / name).write_text("name: x\n")
    plain = suite_request([], tmp_path, [])
    assert not plain.any
    assert not is_requested_suite(tmp_path / "suites" / "a.yaml", plain)

    folder = suite_request(["suites"], tmp_path, [])
    assert is_requested_suite(tmp_path / "suites" / "a.yaml", folder)
    assert not is_requested_suite(tmp_path / "suites" / "deeper" / "b.yaml", folder)
    dot = suite_request(["."], tmp_path, [])
    assert is_requested_suite(tmp_path / "c.yaml", dot)
    assert not is_requested_suite(tmp_path / "suites" / "a.yaml", dot)

    by_id = suite_request(["suites/deeper/b.yaml::x[case]"], tmp_path, [])
    assert is_requested_suite(tmp_path / "suites" / "deeper" / "b.yaml", by_id)
    by_option = suite_request([], tmp_path, [tmp_path / "c.yaml"])
    assert is_requested_suite(tmp_path / "c.yaml", by_option)


def test_named_suite_files_are_the_named_files_and_folders_own_yaml_once(
        tmp_path: Path) -> None:
    """Issue 31 point 3: what --orbench-suite / orbench_suites add beside pytest's arguments."""
    (tmp_path / "suites" / "deeper").mkdir(parents=True)
    for name in ("suites/b.yml", "suites/a.yaml", "suites/deeper/c.yaml", "suites/notes.txt",
                 "s.yaml"):
        (tmp_path / name).write_text("name: x\n")
    folder, single = tmp_path / "suites", tmp_path / "s.yaml"
    request = suite_request([], tmp_path, [single, folder, folder / "a.yaml", single])
    assert named_suite_files(request) == [single, folder / "a.yaml", folder / "b.yml"]
    assert named_suite_files(suite_request(["suites"], tmp_path, [])) == []  # typed: pytest's


def test_a_suite_outside_the_rootdir_is_named_by_its_relative_path() -> None:
    root = Path("/home/me/project")
    assert node_path(root / "suites" / "a.yaml", root) is None
    assert node_path(Path("/venv/lib/other/suites/smoke.yaml"), root) == \
        "../../../venv/lib/other/suites/smoke.yaml"


def test_a_ready_suite_is_named_the_same_wherever_it_is_installed() -> None:
    """Issue 31 point 6: orbench:<file>, from a checkout, an editable install or a wheel."""
    from orbench_pytest.catalog.selection import suite_file_of

    for ready in (Path("/venv/lib/orbench_pytest/suites"), Path("/home/me/project/suites"),
                  Path("/other/venv/site-packages/orbench_pytest/suites")):
        for root in (Path("/home/me/project"), Path("/elsewhere")):
            assert node_path(ready / "smoke.yaml", root, ready) == "orbench:smoke.yaml"
            assert suite_file_of("orbench:smoke.yaml", root, ready) == ready / "smoke.yaml"
    assert node_path(Path("/home/me/project/suites/mine.yaml"), Path("/home/me/project"),
                     Path("/venv/lib/orbench_pytest/suites")) is None


# --------------------------------------------------------------------------- the model

def settings(**values: object):
    return build_settings({f"orbench_{k}": v for k, v in values.items()}, env={})


def test_no_model_no_target_no_url_is_an_error_listing_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"no model to test: .*--orbench-model=local"):
        choose_model(settings(), env={}, served=lambda url, s: pytest.fail("asked"))
    named = settings(model="gpt-4o-mini")
    assert choose_model(named, env={})[0] is named
    target = settings(target="app:answer")
    assert choose_model(target, env={})[0] is target


def test_a_base_url_alone_asks_the_endpoint_which_model() -> None:
    asked: list[str] = []

    def served(url: str, _settings: object) -> list[str]:
        asked.append(url)
        return ["only-one"]

    chosen, line = choose_model(settings(base_url="http://127.0.0.1:1/v1"), env={},
                                served=served)
    assert chosen.target.model == "only-one" and "only-one" in (line or "")
    chosen, _ = choose_model(settings(), env={"OPENAI_BASE_URL": "http://127.0.0.1:2/v1"},
                             served=served)
    assert asked == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    many = [f"model-{i}" for i in range(25)]
    with pytest.raises(ConfigError, match=r"serves several models \(model-0, .*, … \(25 in all\)"):
        choose_model(settings(base_url="http://127.0.0.1:1/v1"), env={},
                     served=lambda url, s: many)


def test_an_endpoint_without_a_model_list_is_a_usage_error(openai_server) -> None:
    from orbench_pytest.fetch.endpoints import served_models
    from tests.hub_server import HubServer

    assert served_models(openai_server.url, None, 30.0) == ["test-model"]
    with HubServer() as other:  # a server that is not OpenAI-compatible
        other.add("acme/p", "r", "models", b"<html>not a model list</html>")
        with pytest.raises(ConfigError, match=r"GET http://127.0.0.1:\d+/v1/models answered "
                                              r"HTTP 404; name the model"):
            served_models(f"{other.endpoint}/v1", None, 30.0)
        with pytest.raises(ConfigError, match=r"did not answer an OpenAI model list"):
            served_models(f"{other.endpoint}/raw/acme/p/r", None, 30.0)
    with pytest.raises(ConfigError, match=r"cannot list the models of http://127.0.0.1:9/v1"):
        served_models("http://127.0.0.1:9/v1", None, 30.0)


# --------------------------------------------------------------------------- big suites

def big_suite(tmp_path: Path, count: int, **extra: object) -> Path:
    (tmp_path / "big.csv").write_text("prompt\n" + "".join(f"p{i}\n" for i in range(count)))
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({"name": "big", "source": "big.csv", "expect": "comply",
                                    **extra}))
    return path


def test_a_suite_over_the_limit_runs_only_sampled_or_asked_for_in_full(tmp_path: Path) -> None:
    path = big_suite(tmp_path, UNSAMPLED_LIMIT + 1)
    with pytest.raises(ConfigError, match=f"big would send {UNSAMPLED_LIMIT + 1:,} prompts; "
                                          "sample it with --orbench-subset=N"):
        load_suite(path, SuiteOptions())
    assert len(load_suite(path, SuiteOptions(subset=1.0)).cases) == UNSAMPLED_LIMIT + 1
    assert len(load_suite(path, SuiteOptions(subset=100)).cases) == 100
    at_limit = big_suite(tmp_path, UNSAMPLED_LIMIT)
    assert len(load_suite(at_limit, SuiteOptions()).cases) == UNSAMPLED_LIMIT


def test_pinned_rows_stop_a_run_before_the_download_and_check_the_file(tmp_path: Path) -> None:
    path = big_suite(tmp_path, 3, rows=80359, source="missing.csv")
    with pytest.raises(ConfigError, match="would send 80,359 prompts"):
        load_suite(path, SuiteOptions())  # before reading (here: a missing) file
    wrong = big_suite(tmp_path, 3, rows=4)
    with pytest.raises(ConfigError, match="rows: the suite pins 4 rows, the file has 3"):
        load_suite(wrong, SuiteOptions())
    ok = big_suite(tmp_path, 3, rows=3)
    assert len(load_suite(ok, SuiteOptions()).cases) == 3
    with pytest.raises(ConfigError, match="rows: expected the file's row count"):
        load_suite(big_suite(tmp_path, 3, rows="many"), SuiteOptions())


def test_sample_all_is_every_row() -> None:
    from orbench_pytest.catalog.sampling import parse_sample, stratified_sample

    assert parse_sample("all") == parse_sample("ALL") == 1.0
    assert stratified_sample(["a", "b", "a"], parse_sample("all"), seed=1) == [0, 1, 2]
