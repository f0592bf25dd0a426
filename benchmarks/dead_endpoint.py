"""A dead endpoint (a port nobody listens on): how many lines the run prints, and its exit code.

Target: at most 200 lines whatever the number of prompts, exit 1, serial and under -n 2.

    python benchmarks/dead_endpoint.py [--sizes 1974 80359]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
from pathlib import Path

from _common import load, orbench_command, pytest_env, run_process, synthesise


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1974, 80_359])
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="orbench-dead-"))
    print(f"load before: {load()}")
    try:
        for n in args.sizes:
            root = synthesise(top / str(n), n)
            env, plugin = pytest_env(root)
            url = f"http://127.0.0.1:{closed_port()}/v1"
            for extra in ([], ["-n", "2"]):
                command = orbench_command(plugin, url, 16, root / "cache.sqlite3",
                                          "--orbench-backoff=0.05", *extra)
                done = run_process(command, root, env, ok_codes=(0, 1, 2, 3, 4))
                lines = len(done.output.splitlines())
                gate = next((line for line in done.output.splitlines()
                             if line.startswith("orbench gate: ")), "(no gate line)")
                verdict = "OK" if lines <= 200 and done.returncode == 1 else "MISSED"
                print(f"  N={n:6} {' '.join(extra) or 'serial':6} {lines:4} lines, exit "
                      f"{done.returncode}, {done.wall_s:.1f} s, peak RSS {done.peak_rss_mib} "
                      f"MiB → {verdict}")
                print(f"    {gate[:160]}{'…' if len(gate) > 160 else ''}")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
