"""The ready suites this project ships, found by name.

In git they live once, in the repository's top-level `suites/` folder; `orbench_pytest/suites`
is a link to it, so the wheel carries them as package data in `orbench_pytest/suites/`, together
with the starter `thresholds.yaml`. A checkout finds them at the top level (through the link, or
without it where the checkout made none).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import stat_of

STARTER_THRESHOLDS = "thresholds.yaml"
_PACKAGE = Path(__file__).resolve().parents[1]


def ready_suite_dir() -> Path:
    packaged = _PACKAGE / "suites"
    # resolve(): in a checkout, the top-level folder the link names, as node ids show it
    return packaged.resolve() if packaged.is_dir() else _PACKAGE.parent / "suites"


def ready_suite_names() -> list[str]:
    return sorted(path.stem for path in _suite_files())


def is_suite_name(ref: str) -> bool:
    return ref in ready_suite_names()


def starter_thresholds() -> Path:
    return ready_suite_dir() / STARTER_THRESHOLDS


def resolve_suite(ref: str, base: Path, option: str = "--orbench-suite") -> Path:
    """A ready suite's name → its packaged file; anything else is a path (file or folder)."""
    if is_suite_name(ref):
        return ready_suite_dir() / f"{ref}.yaml"
    path = base / Path(ref).expanduser()
    if stat_of(path, option) is not None:
        return path
    raise ConfigError(f"{option}: {ref!r} is neither a ready suite "
                      f"({', '.join(ready_suite_names())}) nor an existing suite file or folder")


@dataclass(frozen=True)
class ReadySuite:
    """A suite shipped with the plugin, as `orbench suites` lists it."""

    name: str
    prompts: int | None  # its inline prompts, a bundled file's (filtered) rows, or pinned `rows`
    expects: str
    source: str
    description: str
    path: Path
    license: str = ""
    citation: str = ""


def ready_suites() -> list[ReadySuite]:
    """What `orbench suites` lists, read from the suite files and the files bundled beside
    them (nothing downloaded)."""
    from orbench_pytest.catalog.suites import SuiteOptions, load_suite, read_suite_document

    listed = []
    for path in _suite_files():
        data = read_suite_document(path)
        prompts = data.get("prompts")
        if isinstance(prompts, list):
            count: int | None = len(prompts)
            expects = " + ".join(sorted({str(p.get("expect")) for p in prompts
                                         if isinstance(p, dict)}))
            source = "inline (no download)"
        else:
            rows = data.get("rows")
            count = rows if isinstance(rows, int) else None
            expect = data.get("expect")
            expects = expect if isinstance(expect, str) else "comply + refuse"
            source = str(data.get("source"))
            if "://" not in source:  # bundled: counted as the suite reads it (CoCoNot's 395)
                count = load_suite(path, SuiteOptions(ready_suite_dir=path.parent),
                                   data).full_size
                source = f"bundled ({source})"
        listed.append(ReadySuite(path.stem, count, expects, source,
                                 str(data.get("description") or ""), path,
                                 str(data.get("license") or ""),
                                 str(data.get("citation") or "")))
    return listed


def _suite_files() -> list[Path]:
    folder = ready_suite_dir()
    return sorted(path for path in folder.glob("*.yaml") if path.name != STARTER_THRESHOLDS)
