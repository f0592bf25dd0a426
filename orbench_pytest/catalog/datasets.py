"""Data sources of suites: local files, the Hugging Face hub and https:// URLs.

`load_rows(source, ...)` returns every row of a CSV, JSONL or Parquet file as `dict[str, str]`.
Remote files are looked for, in order, in the data dirs (`--orbench-data-dir`, repeatable;
`$ORBENCH_DATA_DIR`, a path list), in the cache (`$ORBENCH_CACHE_DIR/hub/...`), and only then
downloaded; a download is streamed to a temporary file next to its cache path, verified, and
moved into place atomically, so an interrupted or concurrent (xdist) run never sees half a file.

Every problem is a one-line `ConfigError` that names the file or URL and the fix.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from orbench_pytest.core import defaults
from orbench_pytest.core.artefacts import file_sha256, replacing
from orbench_pytest.core.bounded import csv_field_limit, regular_file
from orbench_pytest.core.defaults import data_dirs_from_env, default_cache_dir
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved

Progress = Callable[[int, "int | None"], None]

FORMATS = (".csv", ".jsonl", ".parquet")
# Downloads smaller than this finish before a progress line would be worth printing.
PROGRESS_MIN_BYTES = 4 * 1024 * 1024
# A cell may hold a whole conversation as JSON: room for its own limit to be the one that speaks.
CSV_CELL_CHARS = 2 * defaults.CONVERSATION_CHARS
_CHUNK = 1024 * 1024
_TRUE = {"1", "true", "yes", "on"}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_HF = re.compile(r"^hf://datasets/(?P<owner>[A-Za-z0-9][\w.-]*)/(?P<name>[\w.-]+)"
                 r"(?:@(?P<rev>[^/]+))?/(?P<path>.+)$")
_DATA_DIR_HINT = "put the file in a folder named by ORBENCH_DATA_DIR or --orbench-data-dir"
_OFFLINE_HINT = f"{_DATA_DIR_HINT}, or set HF_HUB_OFFLINE=1 once it is in the cache"


@dataclass(frozen=True)
class DataOptions:
    cache_dir: Path
    data_dirs: tuple[Path, ...] = ()
    offline: bool = False
    hub_endpoint: str = "https://huggingface.co"
    token: str | None = field(default=None, repr=False)  # a secret: never in repr or messages

    @classmethod
    def from_env(cls, data_dirs: Sequence[Path] = (),
                 env: Mapping[str, str] | None = None) -> DataOptions:
        env = os.environ if env is None else env
        if not data_dirs:
            data_dirs = data_dirs_from_env(env)
        return cls(
            cache_dir=default_cache_dir(env),
            data_dirs=tuple(data_dirs),
            offline=env.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE,
            hub_endpoint=(env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/"),
            token=env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None,
        )


@dataclass(frozen=True)
class HubFile:
    """hf://datasets/OWNER/NAME@REVISION/PATH"""

    owner: str
    name: str
    revision: str | None
    path: str

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def url(self, endpoint: str) -> str:
        # A revision such as refs/convert/parquet is one path segment on the hub.
        revision = quote(self.revision or "main", safe="")
        return f"{endpoint}/datasets/{self.repo}/resolve/{revision}/{quote(self.path)}"

    def cache_path(self, cache_dir: Path) -> Path:
        revision = (self.revision or "main").replace("/", "--")
        return cache_dir / "hub" / self.owner / self.name / revision / self.path


def parse_hub_source(source: str) -> HubFile:
    match = _HF.match(source)
    if match is None:
        raise ConfigError(f"{source}: expected hf://datasets/OWNER/NAME@REVISION/PATH/FILE")
    path = match["path"]
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise ConfigError(f"{source}: the file path inside the dataset may not contain "
                          "empty, '.' or '..' parts")
    return HubFile(match["owner"], match["name"], match["rev"], path)


# --------------------------------------------------------------------------- public entry point

def load_rows(source: str, *, base_dir: Path, sha256: str | None, options: DataOptions,
              allow_outside: bool = False, require_pin: bool = False,
              progress: Progress | None = None) -> list[dict[str, str]]:
    """Every row of `source` (a path relative to `base_dir`, hf:// or https://)."""
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _HEX64.match(sha256):
            raise ConfigError(f"{source}: sha256: expected 64 hex digits, got {sha256!r}")
    path = resolve_source(source, base_dir=base_dir, sha256=sha256, options=options,
                          allow_outside=allow_outside, require_pin=require_pin,
                          progress=progress)
    return read_rows(path)


def resolve_source(source: str, *, base_dir: Path, sha256: str | None, options: DataOptions,
                   allow_outside: bool = False, require_pin: bool = False,
                   progress: Progress | None = None) -> Path:
    """A verified local path holding `source`, downloading it if needed."""
    if source.startswith("hf://"):
        return _hub_file(source, sha256, options, require_pin, progress)
    if source.startswith(("https://", "http://")):
        return _url_file(source, sha256, options, require_pin, progress)
    if "://" in source:
        raise ConfigError(f"{source}: unknown scheme (allowed: a relative path, hf://datasets/…, "
                          "https://…)")
    path = _local_path(source, base_dir, allow_outside)
    if sha256 is not None:
        verify_sha256(path, sha256, remove=False)
    return path


def _local_path(source: str, base_dir: Path, allow_outside: bool) -> Path:
    base = resolved(base_dir)
    # resolve() follows symlinks too: a link inside the suite folder to ~/.ssh is caught as well.
    path = resolved(base / Path(source).expanduser(), "source")
    if not allow_outside and not path.is_relative_to(base):
        raise ConfigError(f"{source}: outside the suite's folder {base}; keep data files next "
                          "to the suite file (or below it)")
    if regular_file(path, "the data file") is None:
        raise ConfigError(f"{path}: file not found (source {source!r} is relative to {base})")
    return path


# --------------------------------------------------------------------------- hub and URL sources

def _hub_file(source: str, sha256: str | None, options: DataOptions, require_pin: bool,
              progress: Progress | None) -> Path:
    hub = parse_hub_source(source)
    _check_format(source, hub.filename)
    _check_revision(source, hub.revision, sha256, require_pin)
    found = _from_data_dir(options, hub.path, sha256)
    if found is not None:
        return found
    headers = {"Authorization": f"Bearer {options.token}"} if options.token else {}
    return _cached_or_downloaded(
        hub.url(options.hub_endpoint), hub.cache_path(options.cache_dir), hub.filename, sha256,
        options, headers, progress, require_digest=require_pin,
        gated_hint=f"the dataset {hub.repo} is gated or private: accept its terms on "
                   f"{options.hub_endpoint}/datasets/{hub.repo} and set HF_TOKEN")


def _cached_or_downloaded(url: str, target: Path, filename: str, sha256: str | None,
                          options: DataOptions, headers: dict[str, str],
                          progress: Progress | None, gated_hint: str,
                          require_digest: bool = False) -> Path:
    """The cached copy (checked again), else a download, unless offline mode forbids it."""
    if target.is_file():
        if sha256 is not None:
            verify_sha256(target, sha256, remove=True)
        return target
    if options.offline:
        raise ConfigError(f"{filename}: not in the cache ({target}) and HF_HUB_OFFLINE=1 "
                          f"forbids downloading {url}; {_DATA_DIR_HINT}")
    download(url, target, sha256=sha256, headers=headers, progress=progress,
             gated_hint=gated_hint, require_digest=require_digest)
    return target


def _url_file(source: str, sha256: str | None, options: DataOptions, require_pin: bool,
              progress: Progress | None) -> Path:
    parts = urlsplit(source)
    filename = parts.path.rsplit("/", 1)[-1]
    _check_format(source, filename)
    if require_pin and sha256 is None:
        raise ConfigError(f"{source}: a ready suite needs sha256: for an https:// source "
                          "(a URL's content can change)")
    if sha256 is None:
        warnings.warn(f"{source}: no sha256 pin; the file can change under the same URL",
                      UserWarning, stacklevel=4)
    found = _from_data_dir(options, filename, sha256)
    if found is not None:
        return found
    # The URL's digest keeps two URLs ending in the same file name apart.
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    return _cached_or_downloaded(
        source, options.cache_dir / "url" / key / filename, filename, sha256, options, {},
        progress, gated_hint="the server wants credentials; download the file yourself and "
                             "point ORBENCH_DATA_DIR at its folder")


def _check_format(source: str, filename: str) -> None:
    """Refuse an unreadable file type before spending a download on it."""
    suffix = Path(filename).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"{source}: unknown file type {suffix or '(none)'!r} "
                          f"(allowed: {', '.join(FORMATS)})")


def _check_revision(source: str, revision: str | None, sha256: str | None,
                    require_pin: bool) -> None:
    """Ready suites pin what they download; a user's moving `main` only gets a warning."""
    if revision is not None and _COMMIT.match(revision):
        return
    if require_pin:
        raise ConfigError(f"{source}: a ready suite must pin a commit: "
                          "hf://datasets/OWNER/NAME@<40-hex commit>/FILE")
    shown = revision or "main"
    if revision is None or revision in ("main", "master") or sha256 is None:
        warnings.warn(f"{source}: revision {shown!r} can move; pin a commit "
                      "(…@<40-hex commit>/FILE) so runs stay comparable", UserWarning,
                      stacklevel=4)


def _from_data_dir(options: DataOptions, path: str, sha256: str | None) -> Path | None:
    """A pre-downloaded copy (air-gapped CI) wins over cache and network; it is never deleted.
    The data dirs are looked in in the order given; the first copy found is used."""
    for folder in options.data_dirs:
        for candidate in (folder / path, folder / path.rsplit("/", 1)[-1]):
            if candidate.is_file():
                if sha256 is not None:
                    verify_sha256(candidate, sha256, remove=False)
                return candidate
    return None


def download(url: str, target: Path, *, sha256: str | None, headers: Mapping[str, str],
             progress: Progress | None = None, gated_hint: str = "",
             require_digest: bool = False) -> None:
    """Stream `url` into `target` via a temporary file; verify; replace atomically.

    `require_digest`: with no pin of its own, the file must still be verified against the
    sha256 the hub names for it; a response that names none is refused, not trusted.
    """
    import httpx  # only needed when something is downloaded

    with replacing(target, suffix=".part") as tmp:
        with tmp.open("xb") as out:
            expected = _stream(httpx, url, out, headers, progress, gated_hint)
        want = sha256 or expected
        if want is None and require_digest:
            raise ConfigError(f"{url}: the server named no sha256 for the file (no "
                              "X-Linked-Etag) and the suite pins none, so the download cannot "
                              f"be verified; {_DATA_DIR_HINT} after checking it yourself")
        if want is not None:
            # The temporary file's name ends in .part: judge line endings by the target's.
            verify_sha256(tmp, want, remove=True, shown=url, suffix=target.suffix)


def _stream(httpx: Any, url: str, out: Any, headers: Mapping[str, str],
            progress: Progress | None, gated_hint: str) -> str | None:
    """Write the body of `url` to `out`; return the hub's sha256 of it when it names one."""
    timeout = httpx.Timeout(defaults.DOWNLOAD_CONNECT_TIMEOUT_S,
                            read=defaults.DOWNLOAD_READ_TIMEOUT_S)
    try:
        with httpx.Client(follow_redirects=True, timeout=timeout) as client, \
                client.stream("GET", url, headers=dict(headers)) as response:
            _check_status(url, response.status_code, gated_hint, bool(headers))
            total = _content_length(response)
            done = 0
            for chunk in response.iter_bytes(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress is not None and (total or done) >= PROGRESS_MIN_BYTES:
                    progress(done, total)
            if total is not None and done < total:
                raise ConfigError(f"{url}: download cut short ({done} of {total} bytes); "
                                  "run again")
            return _linked_sha256(response)
    except httpx.RemoteProtocolError as exc:
        raise ConfigError(f"{url}: download cut short ({_reason(exc)}); run again") from None
    except httpx.HTTPError as exc:
        raise ConfigError(f"{url}: cannot download ({_reason(exc)}); for offline runs "
                          f"{_OFFLINE_HINT}") from None


def _check_status(url: str, status: int, gated_hint: str, sent_token: bool) -> None:
    if status < 400:
        return
    if status in (401, 403):
        if sent_token:
            raise ConfigError(f"{url}: HTTP {status}: HF_TOKEN was refused; {gated_hint} "
                              "(and check the token can read it)")
        raise ConfigError(f"{url}: HTTP {status}: {gated_hint}")
    if status == 404:
        raise ConfigError(f"{url}: HTTP 404 not found; check the repository, revision and "
                          "file name")
    raise ConfigError(f"{url}: HTTP {status}; try again later, or for offline runs "
                      f"{_OFFLINE_HINT}")


def _content_length(response: Any) -> int | None:
    # With a content encoding the header counts compressed bytes, not the bytes we write.
    if response.headers.get("content-encoding", "identity") != "identity":
        return None
    value = response.headers.get("content-length")
    return int(value) if value and value.isdigit() else None


def _linked_sha256(response: Any) -> str | None:
    """The hub names an LFS file's sha256 in X-Linked-Etag on its redirect: verify against it
    even when the suite has no pin of its own (git blob etags are 40 hex and are ignored)."""
    for hop in [*response.history, response]:
        etag = str(hop.headers.get("x-linked-etag", "")).strip().strip('"').removeprefix("W/")
        etag = etag.strip('"').lower()
        if _HEX64.match(etag):
            return etag
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- sha256

def verify_sha256(path: Path, expected: str, *, remove: bool, shown: str | None = None,
                  suffix: str | None = None) -> None:
    """Raise (and delete `path` when `remove`) unless its content matches `expected`.

    A copy that differs only in line endings is accepted: the hub serves OR-Bench with CRLF
    and no final newline, the widely shared copies (and git checkouts) use LF, and the rows
    are the same either way.
    """
    got = file_sha256(path)
    if got == expected or expected in _line_ending_digests(path, suffix or path.suffix):
        return
    if remove:
        path.unlink(missing_ok=True)
    fix = ("the bad copy was removed; run again to download it" if remove
           else "replace the file with the published one, or fix the pin")
    raise ConfigError(f"{shown or path}: sha256 mismatch: expected {expected}, got {got}; {fix}")


def _line_ending_digests(path: Path, suffix: str) -> set[str]:
    if suffix.lower() not in (".csv", ".jsonl", ".json", ".txt", ".tsv"):
        return set()
    data = path.read_bytes()
    lf = data.replace(b"\r\n", b"\n").rstrip(b"\n")
    variants = (lf, lf + b"\n", lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r\n") + b"\r\n")
    return {hashlib.sha256(variant).hexdigest() for variant in variants}


# --------------------------------------------------------------------------- file formats

def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a data file of at most DATA_FILE_LIMIT bytes (a one-line error beyond)."""
    from orbench_pytest.core.bounded import DATA_FILE_LIMIT, MIB

    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if size > DATA_FILE_LIMIT:
        raise ConfigError(f"{path}: {size / MIB:,.0f} MiB, larger than the "
                          f"{DATA_FILE_LIMIT // MIB} MiB a data file may hold; split it into "
                          "several suites")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        rows = _parquet_rows(path)
    elif suffix in (".csv", ".jsonl"):
        text = _read_text(path)
        rows = _csv_rows(path, text) if suffix == ".csv" else _jsonl_rows(path, text)
    else:
        raise ConfigError(f"{path}: unknown file type {suffix or '(none)'!r} "
                          f"(allowed: {', '.join(FORMATS)})")
    if not rows:
        raise ConfigError(f"{path}: no rows; the file holds a header at most")
    return rows


def _read_text(path: Path) -> str:
    from orbench_pytest.core.bounded import DATA_FILE_LIMIT, read_bytes

    try:
        data = read_bytes(path, DATA_FILE_LIMIT, "the data file")  # grown since its stat
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if not data.strip():
        raise ConfigError(f"{path}: empty file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); save it as UTF-8") from None


def _csv_rows(path: Path, text: str) -> list[dict[str, str]]:
    with csv_field_limit(CSV_CELL_CHARS):
        return _csv_records(path, text)


def _csv_records(path: Path, text: str) -> list[dict[str, str]]:
    # csv.reader + zip is several times faster than DictReader at 80K rows.
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
        _check_header(path, header)
        width = len(header)
        rows: list[dict[str, str]] = []
        for record in reader:
            if len(record) == width:
                rows.append(dict(zip(header, record, strict=True)))
            elif record:  # blank lines are skipped, ragged ones are an error
                raise ConfigError(f"{path}: line {reader.line_num}: {len(record)} fields, the "
                                  f"header has {width}")
    except csv.Error as exc:
        raise ConfigError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
    return rows


def _check_header(path: Path, header: Sequence[str]) -> None:
    if not any(header):
        raise ConfigError(f"{path}: the first line must name the columns")
    seen: set[str] = set()
    for name in header:
        if not name or name in seen:
            what = "an empty column name" if not name else f"column {name!r} twice"
            raise ConfigError(f"{path}: the header has {what}")
        seen.add(name)


def _jsonl_rows(path: Path, text: str) -> list[dict[str, str]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, deep nesting
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise ConfigError(f"{path}: line {number}: not usable JSON ({reason})") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: line {number}: expected a JSON object per line")
        rows.append({str(key): _text(item) for key, item in value.items()})
    return rows


def _parquet_rows(path: Path) -> list[dict[str, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"{path}: reading Parquet needs pyarrow: "
                          "pip install 'orbench-pytest[parquet]'") from None
    try:
        records = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises many types for a damaged file
        raise ConfigError(f"{path}: not a readable Parquet file ({_reason(exc)})") from None
    return [{str(key): _text(item) for key, item in record.items()} for record in records]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
