"""The gate workflow `orbench init` writes: the shipped template (package data) with its `env`
block filled in, and how CI installs orbench-pytest, which is on no package index.

The install line comes from --install, else from what the repository shows: a committed wheel
of the plugin, a requirements file that names it, else the git URL this copy was installed
from. Each value is checked (init_values), written as a YAML string and read back before the
file is written.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import metadata, resources
from pathlib import Path

import yaml

from orbench_pytest.cli.init_values import checked_value
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import url_secrets

WORKFLOW_RESOURCE = "orbench-gate.yml"  # package data: orbench_pytest/data/
DISTRIBUTION = "orbench-pytest"
WHEEL_GLOB = "orbench_pytest-*.whl"
_NAMES_PLUGIN = re.compile(r"^\s*orbench[-_.]pytest(?![\w.-])", re.IGNORECASE | re.MULTILINE)


def template() -> str:
    return resources.files("orbench_pytest.data").joinpath(WORKFLOW_RESOURCE).read_text(
        encoding="utf-8")


def template_env() -> dict[str, str]:
    env: dict[str, str] = yaml.safe_load(template())["env"]
    return env


def default_suites_size() -> tuple[int, int]:
    """The prompts of the template's suites (ready suites' sizes), and its job's minutes."""
    from orbench_pytest.catalog.ready import ready_suites

    data = yaml.safe_load(template())
    names = {flag.partition("=")[2] for flag in data["env"]["ORBENCH_SUITES"].split()}
    prompts = sum(suite.prompts or 0 for suite in ready_suites() if suite.name in names)
    return prompts, int(data["jobs"]["gate"]["timeout-minutes"])


def render_workflow(values: Mapping[str, str]) -> str:
    """The template with the `env` values given (each `  NAME: ...` line of its env block)."""
    text = template()
    for name, value in values.items():
        line = f"  {name}: {json.dumps(value)}"  # a JSON string is a YAML string
        text, found = re.subn(rf"^  {name}: .*$", line.replace("\\", "\\\\"), text,
                              count=1, flags=re.MULTILINE)
        if not found:
            raise ValueError(f"the workflow template has no env line {name}")
    env = yaml.safe_load(text)["env"]
    if any(env.get(name) != value for name, value in values.items()):
        raise ConfigError("the workflow's env block would not read back as given; "
                          "edit it by hand")
    return text


@dataclass(frozen=True)
class Install:
    """The pip arguments CI installs orbench-pytest with ("" when unknown), and why."""

    spec: str
    source: str


def install_spec(root: Path, given: str | None) -> Install:
    if given is not None:
        return Install(_checked_install(root, given), "as given")
    wheels = sorted(name for name in _committed(root) if fnmatch(Path(name).name, WHEEL_GLOB))
    if wheels:
        return Install(f"./{wheels[-1]}", f"the wheel committed at {wheels[-1]}")
    for requirements in sorted(root.glob("requirements*.txt")):
        if requirements.is_file() and not requirements.is_symlink() and \
                _NAMES_PLUGIN.search(_text(requirements)):
            return Install(f"-r {requirements.name}", f"{requirements.name} names it")
    url = git_spec(installed_direct_url())
    if url:
        return Install(url, "the git commit this copy was installed from")
    return Install("", "")


def _checked_install(root: Path, given: str) -> str:
    checked_value("--install", given, workflow=True)
    for word in given.split():
        if word.endswith(".whl") and "://" not in word:
            path = Path(word)
            inside = not path.is_absolute() and ".." not in path.parts
            if not inside:
                raise ConfigError(f"--install: {word} is not a path inside the repository, "
                                  "and CI has only the repository: commit the wheel into it "
                                  "and give its path there (./wheels/…)")
            if not (root / path).is_file():
                raise ConfigError(f"--install: {word}: no such file in the repository; "
                                  "commit the wheel and give its path there (./wheels/…)")
    return given


def _committed(root: Path) -> list[str]:
    """The repository's committed files (git ls-files), none where git is not there."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                                timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if listed.returncode != 0:
        return []
    return [name for name in listed.stdout.decode("utf-8", "replace").split("\0") if name]


def installed_direct_url() -> str | None:
    """The installed copy's direct_url.json (PEP 610): where pip installed it from."""
    try:
        return metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def git_spec(direct_url: str | None) -> str | None:
    """`git+URL@commit` from a direct_url.json that records a git install from a URL that
    holds no credential (and no user name: ssh, or a token)."""
    try:
        data = json.loads(direct_url or "null")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    vcs, url = data.get("vcs_info"), data.get("url")
    if not isinstance(vcs, dict) or vcs.get("vcs") != "git" or not isinstance(url, str) or \
            not isinstance(vcs.get("commit_id"), str) or url_secrets(url) or \
            "@" in url.partition("://")[2].split("/")[0]:
        return None
    return f"git+{url}@{vcs['commit_id']}"


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:100_000]
    except OSError:
        return ""
