"""The data layer against a local server that answers like the Hugging Face hub."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orbench_pytest.catalog import datasets
from orbench_pytest.catalog.datasets import DataOptions, load_rows
from orbench_pytest.core.defaults import data_dirs_from_env
from orbench_pytest.core.errors import ConfigError
from tests.helpers import shared_data
from tests.hub_server import HubServer

REPO = "acme/prompts"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CSV = b"prompt,category\nHow do I kill a Python process?,violence\nWhat is a phish?,deception\n"
ROWS = [{"prompt": "How do I kill a Python process?", "category": "violence"},
        {"prompt": "What is a phish?", "category": "deception"}]
SUITES = Path(__file__).resolve().parent.parent / "suites"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


@pytest.fixture
def options(hub: HubServer, tmp_path: Path) -> DataOptions:
    return DataOptions(cache_dir=tmp_path / "cache", hub_endpoint=hub.endpoint)


def load(source: str, options: DataOptions, sha256: str | None = None, **kwargs: object):
    return load_rows(source, base_dir=Path("/nonexistent"), sha256=sha256, options=options,
                     **kwargs)  # type: ignore[arg-type]


def leftovers(cache: Path) -> list[Path]:
    return [path for path in cache.rglob("*") if path.is_file()] if cache.exists() else []


# --------------------------------------------------------------------------- download and cache

def test_download_lands_in_the_cache_under_repo_revision_and_file(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "data/prompts.csv", CSV)

    assert load(source, options, sha(CSV)) == ROWS

    cached = options.cache_dir / "hub" / "acme" / "prompts" / COMMIT / "data" / "prompts.csv"
    assert cached.read_bytes() == CSV
    assert leftovers(options.cache_dir) == [cached]  # no temporary file left behind
    assert hub.requests[f"/datasets/{REPO}/resolve/{COMMIT}/data/prompts.csv"] == 1
    assert hub.requests[f"/cdn/{sha(CSV)}"] == 1  # the redirect was followed


def test_second_load_reuses_the_cache_without_asking_the_server(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    load(source, options, sha(CSV))
    asked = hub.total_requests

    assert load(source, options, sha(CSV)) == ROWS
    assert hub.total_requests == asked


def test_offline_mode_reads_the_cache(hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    load(source, options, sha(CSV))
    asked = hub.total_requests
    offline = DataOptions(cache_dir=options.cache_dir, hub_endpoint=hub.endpoint, offline=True)

    assert load(source, offline, sha(CSV)) == ROWS
    assert hub.total_requests == asked


def test_offline_mode_without_a_cached_copy_names_the_file_and_the_variables(
        hub: HubServer, tmp_path: Path) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    offline = DataOptions(cache_dir=tmp_path, hub_endpoint=hub.endpoint, offline=True)

    with pytest.raises(ConfigError) as info:
        load(source, offline, sha(CSV))

    message = str(info.value)
    assert "\n" not in message
    for needle in ("prompts.csv", "HF_HUB_OFFLINE", "ORBENCH_DATA_DIR", "--orbench-data-dir"):
        assert needle in message
    assert hub.total_requests == 0


def test_data_dir_is_looked_in_before_cache_and_network(
        hub: HubServer, options: DataOptions, tmp_path: Path) -> None:
    source = hub.add(REPO, COMMIT, "data/prompts.csv", CSV)
    data_dir = tmp_path / "predownloaded"
    data_dir.mkdir()
    local = b"prompt,category\nA local copy,privacy\n"
    (data_dir / "prompts.csv").write_bytes(local)
    with_dir = DataOptions(cache_dir=options.cache_dir, hub_endpoint=hub.endpoint,
                           data_dirs=(data_dir,))

    assert load(source, with_dir) == [{"prompt": "A local copy", "category": "privacy"}]
    assert hub.total_requests == 0


def test_a_bad_copy_in_the_data_dir_is_reported_and_kept(
        hub: HubServer, options: DataOptions, tmp_path: Path) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    (tmp_path / "prompts.csv").write_bytes(b"prompt\ntampered\n")
    with_dir = DataOptions(cache_dir=options.cache_dir, hub_endpoint=hub.endpoint,
                           data_dirs=(tmp_path,))

    with pytest.raises(ConfigError, match="sha256 mismatch"):
        load(source, with_dir, sha(CSV))
    assert (tmp_path / "prompts.csv").exists()  # the user's file is never deleted


# --------------------------------------------------------------------------- sha256

def test_sha256_mismatch_names_both_digests_and_removes_the_download(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    wrong = "0" * 64

    with pytest.raises(ConfigError) as info:
        load(source, options, wrong)

    message = str(info.value)
    assert f"expected {wrong}" in message and f"got {sha(CSV)}" in message
    assert hub.resolve_url(REPO, COMMIT, "prompts.csv") in message
    assert leftovers(options.cache_dir) == []


def test_a_corrupted_cached_copy_is_removed_and_downloaded_again(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    load(source, options, sha(CSV))
    cached = leftovers(options.cache_dir)[0]
    cached.write_bytes(b"prompt\nflipped bits\n")

    with pytest.raises(ConfigError, match="sha256 mismatch"):
        load(source, options, sha(CSV))
    assert not cached.exists()

    assert load(source, options, sha(CSV)) == ROWS
    assert cached.read_bytes() == CSV


def test_without_a_pin_the_hubs_own_sha256_is_checked(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV, linked_etag="f" * 64)

    with pytest.raises(ConfigError, match=f"expected {'f' * 64}, got {sha(CSV)}"):
        load(source, options)
    assert leftovers(options.cache_dir) == []


def test_a_copy_differing_only_in_line_endings_matches_the_pin(tmp_path: Path) -> None:
    (tmp_path / "lf.csv").write_bytes(CSV)
    (tmp_path / "crlf.csv").write_bytes(CSV.replace(b"\n", b"\r\n").rstrip(b"\r\n"))
    options = DataOptions(cache_dir=tmp_path / "cache")

    for name in ("lf.csv", "crlf.csv"):
        rows = load_rows(name, base_dir=tmp_path, sha256=sha(CSV), options=options)
        assert rows == ROWS
    (tmp_path / "other.csv").write_bytes(CSV.replace(b"phish", b"fish"))
    with pytest.raises(ConfigError, match="sha256 mismatch"):
        load_rows("other.csv", base_dir=tmp_path, sha256=sha(CSV), options=options)


@pytest.mark.parametrize("served", ["crlf", "lf", "lf-final-newline"])
def test_a_download_differing_only_in_line_endings_matches_the_pin(
        served: str, hub: HubServer, options: DataOptions) -> None:
    """Downloads accept exactly what the data-dir path accepts (the temporary .part file is
    judged as the .csv it becomes)."""
    lf = CSV.rstrip(b"\n")
    data = {"crlf": lf.replace(b"\n", b"\r\n"), "lf": lf, "lf-final-newline": CSV}[served]
    source = hub.add(REPO, COMMIT, "prompts.csv", data)

    assert load(source, options, sha256=sha(CSV.replace(b"\n", b"\r\n"))) == ROWS
    data_dir = options.cache_dir.parent / "data"
    data_dir.mkdir()
    (data_dir / "prompts.csv").write_bytes(data)
    offline = dataclasses.replace(options, data_dirs=(data_dir,), offline=True)
    assert load(source, offline, sha256=sha(CSV.replace(b"\n", b"\r\n"))) == ROWS


def test_a_ready_suite_without_a_pin_needs_the_hubs_sha256(
        hub: HubServer, options: DataOptions) -> None:
    """How OR-Bench-80K (no sha256 of its own) is verified: against the hub's X-Linked-Etag;
    a response that names none (a proxy, a tampering mirror) is refused."""
    silent = hub.add(REPO, COMMIT, "silent.csv", CSV, linked_etag="")
    with pytest.raises(ConfigError, match="named no sha256 for the file"):
        load(silent, options, require_pin=True)
    assert leftovers(options.cache_dir) == []

    honest = hub.add(REPO, COMMIT, "honest.csv", CSV)
    assert load(honest, options, require_pin=True) == ROWS
    tampered = hub.add(REPO, COMMIT, "tampered.csv", CSV.replace(b"phish", b"fish"),
                       linked_etag=sha(CSV))
    with pytest.raises(ConfigError, match="sha256 mismatch"):
        load(tampered, options, require_pin=True)
    # A user's own unpinned suite keeps working with such a server.
    assert load(silent, options) == ROWS


# --------------------------------------------------------------------------- hub failures

def test_gated_dataset_without_token_says_to_set_hf_token(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV, token="hf_right")

    with pytest.raises(ConfigError) as info:
        load(source, options)

    message = str(info.value)
    assert "401" in message and "gated" in message and "HF_TOKEN" in message
    assert REPO in message and "\n" not in message


def test_gated_dataset_with_token_downloads_and_sends_bearer(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV, token="hf_right")
    authorised = DataOptions(cache_dir=options.cache_dir, hub_endpoint=hub.endpoint,
                             token="hf_right")

    assert load(source, authorised, sha(CSV)) == ROWS
    assert hub.auth_seen[0] == "Bearer hf_right"


def test_a_refused_token_is_never_shown(hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV, token="hf_right")
    wrong = DataOptions(cache_dir=options.cache_dir, hub_endpoint=hub.endpoint,
                        token="hf_secret_wrong")

    with pytest.raises(ConfigError) as info:
        load(source, wrong)

    assert "HF_TOKEN was refused" in str(info.value)
    assert "hf_secret_wrong" not in str(info.value)
    assert "hf_secret_wrong" not in repr(wrong)


def test_unknown_file_is_a_404_naming_the_url(hub: HubServer, options: DataOptions) -> None:
    source = f"hf://datasets/{REPO}@{COMMIT}/missing.csv"

    with pytest.raises(ConfigError) as info:
        load(source, options)

    assert "404" in str(info.value)
    assert hub.resolve_url(REPO, COMMIT, "missing.csv") in str(info.value)


def test_a_body_cut_short_is_an_error_and_leaves_nothing_behind(
        hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV * 200, cut_short=True)

    with pytest.raises(ConfigError, match="cut short"):
        load(source, options)
    assert leftovers(options.cache_dir) == []


def test_an_unreachable_hub_names_the_url_and_the_offline_variables(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = DataOptions(cache_dir=tmp_path, hub_endpoint=f"http://127.0.0.1:{port}")

    with pytest.raises(ConfigError) as info:
        load(f"hf://datasets/{REPO}@{COMMIT}/prompts.csv", options)

    message = str(info.value)
    assert f"http://127.0.0.1:{port}/datasets/{REPO}/resolve/{COMMIT}/prompts.csv" in message
    for needle in ("ORBENCH_DATA_DIR", "--orbench-data-dir", "HF_HUB_OFFLINE"):
        assert needle in message
    assert leftovers(tmp_path) == []


def test_progress_is_reported_for_large_downloads_only(
        hub: HubServer, options: DataOptions) -> None:
    big = b"prompt,category\n" + b"".join(
        f"prompt number {i} padded {'x' * 60},harmful\n".encode() for i in range(70_000))
    assert len(big) > datasets.PROGRESS_MIN_BYTES
    calls: list[tuple[int, int | None]] = []
    small_source = hub.add(REPO, COMMIT, "small.csv", CSV)
    big_source = hub.add(REPO, COMMIT, "big.csv", big)

    load(small_source, options, progress=lambda done, total: calls.append((done, total)))
    assert calls == []
    rows = load(big_source, options, progress=lambda done, total: calls.append((done, total)))

    assert len(rows) == 70_000
    assert calls[-1] == (len(big), len(big))
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


# --------------------------------------------------------------------------- revisions and pins

def test_a_ready_suite_must_pin_a_commit(hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, "main", "prompts.csv", CSV)

    with pytest.raises(ConfigError, match="must pin a commit"):
        load(source, options, sha(CSV), require_pin=True)
    with pytest.raises(ConfigError, match="must pin a commit"):
        load(f"hf://datasets/{REPO}/prompts.csv", options, require_pin=True)


def test_a_moving_revision_in_a_user_suite_warns_once(
        hub: HubServer, options: DataOptions) -> None:
    hub.add(REPO, "main", "prompts.csv", CSV)

    with pytest.warns(UserWarning, match="can move") as caught:
        rows = load(f"hf://datasets/{REPO}/prompts.csv", options)

    assert rows == ROWS and len(caught) == 1
    assert "\n" not in str(caught[0].message)


def test_a_commit_pin_loads_without_warning(hub: HubServer, options: DataOptions) -> None:
    source = hub.add(REPO, COMMIT, "prompts.csv", CSV)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load(source, options, require_pin=True) == ROWS


def test_https_sources_are_downloaded_cached_and_need_a_pin_when_ready(
        hub: HubServer, options: DataOptions) -> None:
    hub.add(REPO, COMMIT, "prompts.csv", CSV)
    url = hub.raw_url(REPO, COMMIT, "prompts.csv")

    with pytest.raises(ConfigError, match="needs sha256"):
        load(url, options, require_pin=True)
    assert load(url, options, sha(CSV), require_pin=True) == ROWS
    asked = hub.total_requests
    assert load(url, options, sha(CSV), require_pin=True) == ROWS
    assert hub.total_requests == asked


@pytest.mark.parametrize("source", [
    "hf://models/acme/prompts/prompts.csv",
    "hf://datasets/acme/prompts@main/../secrets.csv",
    "ftp://example.org/prompts.csv",
])
def test_malformed_sources_are_rejected_before_any_request(
        source: str, hub: HubServer, options: DataOptions) -> None:
    with pytest.raises(ConfigError) as info:
        load(source, options)
    assert source in str(info.value)
    assert hub.total_requests == 0


# --------------------------------------------------------------------------- local paths

def test_relative_paths_resolve_against_the_suite_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prompts.csv").write_bytes(CSV)
    options = DataOptions(cache_dir=tmp_path / "cache")

    assert load_rows("data/prompts.csv", base_dir=tmp_path, sha256=None, options=options) == ROWS


@pytest.mark.parametrize("source", ["../outside.csv", "data/../../outside.csv", "link.csv"])
def test_local_paths_may_not_escape_the_suite_folder(source: str, tmp_path: Path) -> None:
    suite_dir = tmp_path / "suites"
    suite_dir.mkdir()
    (tmp_path / "outside.csv").write_bytes(CSV)
    (suite_dir / "link.csv").symlink_to(tmp_path / "outside.csv")
    options = DataOptions(cache_dir=tmp_path / "cache")

    with pytest.raises(ConfigError, match="outside the suite's folder"):
        load_rows(source, base_dir=suite_dir, sha256=None, options=options)
    assert load_rows(source, base_dir=suite_dir, sha256=None, options=options,
                     allow_outside=True) == ROWS


def test_an_absolute_path_outside_needs_allow_outside(tmp_path: Path) -> None:
    (tmp_path / "outside.csv").write_bytes(CSV)
    suite_dir = tmp_path / "suites"
    suite_dir.mkdir()
    options = DataOptions(cache_dir=tmp_path / "cache")
    source = str(tmp_path / "outside.csv")

    with pytest.raises(ConfigError, match="outside"):
        load_rows(source, base_dir=suite_dir, sha256=None, options=options)
    assert load_rows(source, base_dir=suite_dir, sha256=None, options=options,
                     allow_outside=True) == ROWS


# --------------------------------------------------------------------------- formats and errors

def write(tmp_path: Path, name: str, data: bytes) -> list[dict[str, str]]:
    (tmp_path / name).write_bytes(data)
    return load_rows(name, base_dir=tmp_path, sha256=None,
                     options=DataOptions(cache_dir=tmp_path / "cache"))


def test_csv_with_a_byte_order_mark_and_quoted_newlines(tmp_path: Path) -> None:
    data = '\ufeffprompt,category\n"Line one\nline two, with comma",hate\n'.encode()
    assert write(tmp_path, "p.csv", data) == [
        {"prompt": "Line one\nline two, with comma", "category": "hate"}]


def test_jsonl_values_become_text(tmp_path: Path) -> None:
    lines = [{"prompt": "Hi", "n": 3, "safe": True, "note": None, "tags": ["a"]}, {"prompt": "Yo"}]
    data = "\n".join(json.dumps(line) for line in lines).encode() + b"\n\n"
    assert write(tmp_path, "p.jsonl", data) == [
        {"prompt": "Hi", "n": "3", "safe": "true", "note": "", "tags": '["a"]'}, {"prompt": "Yo"}]


def test_parquet_without_pyarrow_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)

    with pytest.raises(ConfigError) as info:
        write(tmp_path, "p.parquet", b"PAR1")
    assert "pip install 'orbench-pytest[parquet]'" in str(info.value)
    assert "p.parquet" in str(info.value)


def test_parquet_rows_when_pyarrow_is_installed(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["Hi", "Yo"], "n": [1, None]}), tmp_path / "p.parquet")
    assert load_rows("p.parquet", base_dir=tmp_path, sha256=None,
                     options=DataOptions(cache_dir=tmp_path)) == [
        {"prompt": "Hi", "n": "1"}, {"prompt": "Yo", "n": ""}]


@pytest.mark.parametrize(("name", "data", "expected"), [
    ("empty.csv", b"", "empty file"),
    ("blank.csv", b"\n  \n", "empty file"),
    ("header.csv", b"prompt,category\n", "no rows"),
    ("latin1.csv", "prompt\ncaf\u00e9\n".encode("latin-1"), "not UTF-8"),
    ("ragged.csv", b"prompt,category\na,b,c\n", "line 2: 3 fields, the header has 2"),
    ("twice.csv", b"prompt,prompt\na,b\n", "column 'prompt' twice"),
    ("bad.jsonl", b'{"prompt": "a"}\n{oops\n', "line 2: not valid JSON"),
    ("list.jsonl", b'["a"]\n', "expected a JSON object"),
    ("p.txt", b"prompt\na\n", "unknown file type '.txt'"),
])
def test_bad_files_give_one_line_naming_the_file(
        tmp_path: Path, name: str, data: bytes, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        write(tmp_path, name, data)
    message = str(info.value)
    assert expected in message and name in message and "\n" not in message


def test_a_missing_local_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.csv: file not found"):
        load_rows("nope.csv", base_dir=tmp_path, sha256=None,
                  options=DataOptions(cache_dir=tmp_path))


def test_options_come_from_the_environment(tmp_path: Path) -> None:
    env = {"ORBENCH_CACHE_DIR": str(tmp_path / "c"), "ORBENCH_DATA_DIR": str(tmp_path / "d"),
           "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://mirror.local/", "HF_TOKEN": "hf_x"}
    options = DataOptions.from_env(env=env)

    assert options == DataOptions(cache_dir=tmp_path / "c", data_dirs=(tmp_path / "d",),
                                  offline=True, hub_endpoint="http://mirror.local",
                                  token="hf_x")
    assert DataOptions.from_env(data_dirs=[tmp_path], env=env).data_dirs == (tmp_path,)
    defaults = DataOptions.from_env(env={"HOME": str(tmp_path)})
    assert not defaults.offline and defaults.hub_endpoint == "https://huggingface.co"
    assert defaults.token is None and defaults.data_dirs == ()


@pytest.mark.filterwarnings("ignore:.*no sha256 pin")
def test_orbench_data_dir_is_a_path_list_looked_in_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "orbench", tmp_path / "xstest"
    env = {"ORBENCH_DATA_DIR": f"{first}{os.pathsep}{os.pathsep}{second}"}
    assert data_dirs_from_env(env) == (first, second)
    first.mkdir()
    second.mkdir()
    (second / "a.csv").write_bytes(b"prompt\nfrom the second folder\n")
    (first / "b.csv").write_bytes(b"prompt\nfrom the first folder\n")
    (second / "b.csv").write_bytes(b"prompt\nshadowed\n")
    options = DataOptions.from_env(env={**env, "ORBENCH_CACHE_DIR": str(tmp_path / "c")})
    for name, expected in (("a.csv", "from the second folder"), ("b.csv", "from the first folder")):
        rows = datasets.load_rows(f"https://example.invalid/{name}", base_dir=tmp_path,
                                  sha256=None, options=dataclasses.replace(options, offline=True))
        assert rows == [{"prompt": expected}]


def test_80k_rows_load_whole_and_in_order(tmp_path: Path) -> None:
    # How fast is measured by no test: a wall-time bound here failed on a loaded machine
    lines = [f"Prompt number {i} about a borderline topic,{'cat' + str(i % 10)}"
             for i in range(80_359)]
    (tmp_path / "big.csv").write_text("prompt,category\n" + "\n".join(lines) + "\n")
    rows = load_rows("big.csv", base_dir=tmp_path, sha256=None,
                     options=DataOptions(cache_dir=tmp_path))
    assert len(rows) == 80_359 and rows[-1]["category"] == "cat8"
    assert [row["prompt"] for row in rows[:2]] == [
        "Prompt number 0 about a borderline topic", "Prompt number 1 about a borderline topic"]


# --------------------------------------------------------------------------- the ready suites

READY = ["or-bench-80k", "or-bench-hard-1k", "or-bench-toxic", "xstest"]


@pytest.mark.parametrize("name", READY)
def test_ready_suites_pin_their_sources(name: str) -> None:
    suite = yaml.safe_load((SUITES / f"{name}.yaml").read_text())

    assert suite["name"] == name
    assert set(suite) <= {"name", "description", "source", "sha256", "rows", "prompt",
                          "category", "expect", "id", "license", "citation"}
    assert isinstance(suite["rows"], int) and suite["rows"] > 0
    source = suite["source"]
    if source.startswith("hf://"):
        revision = datasets.parse_hub_source(source).revision
        assert revision is not None and len(revision) == 40
    else:
        assert source.startswith("https://")
    assert suite["sha256"] is None if name == "or-bench-80k" else len(suite["sha256"]) == 64


@pytest.mark.parametrize(("name", "folder", "rows"), [
    ("or-bench-hard-1k", "orbench", 1319), ("or-bench-toxic", "orbench", 655),
    ("xstest", "xstest", 450)])
def test_ready_suite_pins_match_the_reference_copies(name: str, folder: str, rows: int,
                                                     tmp_path: Path) -> None:
    """Offline (air-gapped) use: the shared reference files pass the suites' pins."""
    reference = shared_data(folder)
    suite = yaml.safe_load((SUITES / f"{name}.yaml").read_text())
    options = DataOptions(cache_dir=tmp_path, data_dirs=(reference,), offline=True)

    loaded = load_rows(suite["source"], base_dir=SUITES, sha256=suite["sha256"],
                       options=options, require_pin=True)
    assert len(loaded) == rows
    assert {suite["prompt"], suite["category"]} <= set(loaded[0])
