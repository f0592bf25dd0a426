"""What the core install costs a user: disk, distributions, and the import time of a run.

Builds the wheel from the checkout, installs it with no extras into a fresh venv (pip, from the
configured package index), and compares with an empty venv: the size of site-packages (bytes of
its files) and the number of distributions added, the largest of them named. Each `--extra NAME`
adds a venv with `wheel[NAME]`. Then, inside the core venv, fresh processes (medians of
`--repeat`, after one warm-up that writes the bytecode):

- `pytest --version` with the plugin: what every pytest start imports;
- a live run of the smoke suite (40 prompts) against a local OpenAI-compatible server;
- a Batch API run (`--orbench-batch=submit`) of the same suite against a local Batch API.

For each: total CPU of the pytest process (user + sys), the sum of every module's own import
time (`-X importtime`, whatever imported it: orbench, pytest or a dependency) and the number of
modules imported. The servers run in this process, apart from the timed one.

    python -m benchmarks install [--repeat 7] [--extra batch]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, load
from tests.batch_server import BatchServer
from tests.openai_server import OpenAIServer, Reply

WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "orbench_pytest", "suites")
# Run inside a venv: each distribution's name and the bytes of its files (from its RECORD).
DIST_SIZES = """
import json, importlib.metadata as md
sizes = {}
for dist in md.distributions():
    total = 0
    for f in dist.files or ():
        try:
            total += f.locate().stat().st_size
        except OSError:
            pass
    sizes[dist.metadata["Name"]] = total
print(json.dumps(sizes))
"""


def build_wheel(out: Path) -> Path:
    source = out / "src"
    source.mkdir()
    for name in WHEEL_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True)
    return next(out.glob("orbench_pytest-*.whl"))


def make_venv(where: Path, requirement: str | None) -> Path:
    """A venv without pip of its own (pip from outside installs into it): `requirement`
    and its dependencies from the configured index, or nothing."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    if requirement is not None:
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python),
                               "install", "--quiet", requirement], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip install {requirement} failed:\n{done.stderr[-3000:]}")
    return python


def site_packages(python: Path) -> Path:
    return Path(subprocess.run([python, "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())


def tree_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*")
               if path.is_file() and not path.is_symlink())


def distributions(python: Path) -> dict[str, int]:
    done = subprocess.run([python, "-c", DIST_SIZES], check=True, capture_output=True,
                          text=True)
    return {name.lower(): size for name, size in json.loads(done.stdout).items()}


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def report_install(label: str, python: Path, empty: Path) -> None:
    size = tree_bytes(site_packages(python)) - tree_bytes(site_packages(empty))
    dists = distributions(python)
    added = {name: bytes_ for name, bytes_ in dists.items() if name not in distributions(empty)}
    largest = sorted(added.items(), key=lambda item: -item[1])[:8]
    print(f"{label}: site-packages {mib(size)} over an empty venv, {len(added)} distributions")
    print("  largest: " + ", ".join(f"{name} {mib(bytes_)}" for name, bytes_ in largest))
    print("  all: " + " ".join(sorted(added)))


@dataclass
class Timed:
    cpu_s: float
    import_s: float
    modules: int


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """One fresh process under -X importtime: its CPU (rusage), the sum of every module's own
    import time, the number of modules. Exit 0 or 1 (a gate that fails) both count."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([command[0], "-X", "importtime", *command[1:]], cwd=cwd,
                                   env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        err.seek(0)
        lines = err.read().decode(errors="replace").splitlines()
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{text[-2000:]}\n"
                         + "\n".join(line for line in lines if "import time" not in line))
    own = [int(line.split("|")[0].split(":")[1]) for line in lines
           if line.startswith("import time:") and "self [us]" not in line]
    return Timed(usage.ru_utime + usage.ru_stime, sum(own) / 1e6, len(own))


def measure(label: str, command: list[str], cwd: Path, env: dict[str, str],
            repeat: int) -> None:
    timed(command, cwd, env)  # warm-up
    runs = []
    for index in range(repeat):
        cache = cwd / f"cache-{label[:5]}-{index}"
        runs.append(timed(command, cwd, {**env, "ORBENCH_CACHE_DIR": str(cache)}))
        shutil.rmtree(cache, ignore_errors=True)
    cpu = statistics.median(run.cpu_s for run in runs)
    imports = statistics.median(run.import_s for run in runs)
    modules = statistics.median(run.modules for run in runs)
    print(f"  {label}: CPU {cpu * 1000:.0f} ms, imports {imports * 1000:.0f} ms "
          f"({modules:.0f} modules)")


def refuse_bomb(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
    return Reply(text="I can't help with that." if "bomb" in prompt else "Sure, here is how.")


def measure_runs(python: Path, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "pytest.ini").write_text("[pytest]\n")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("PYTEST", "PYTHON", "OPENAI", "ORBENCH", "HF_"))}
        env["ORBENCH_CACHE_DIR"] = str(cwd / "cache-warm")
        pytest = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        print(f"import time and CPU in the core venv (medians of {repeat} fresh processes):")
        measure("pytest --version", [*pytest, "--version"], cwd, env, repeat)
        smoke = [*pytest, "--orbench-suite=smoke", "--orbench-model=m"]
        with OpenAIServer(refuse_bomb) as server:
            measure("live run, smoke suite", [*smoke, f"--orbench-base-url={server.url}"],
                    cwd, env, repeat)
        with BatchServer() as batch:
            measure("Batch API run, smoke suite",
                    [*smoke, f"--orbench-base-url={batch.url}", "--orbench-batch=submit",
                     "--orbench-batch-poll=0"], cwd, env, repeat)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--extra", action="append", default=[],
                        help="also measure the install with this extra (repeatable)")
    args = parser.parse_args(argv)
    print(f"load before: {load()}; python {sys.version.split()[0]}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        wheel = build_wheel(base)
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1024:.0f} KiB)")
        empty = make_venv(base / "empty", None)
        core = make_venv(base / "core", str(wheel))
        report_install("core (no extras)", core, empty)
        for extra in args.extra:
            python = make_venv(base / f"extra-{extra}", f"{wheel}[{extra}]")
            report_install(f"core + [{extra}]", python, empty)
        measure_runs(core, args.repeat)
    print(f"load after: {load()}; {time.perf_counter() - started:.0f} s in all")
