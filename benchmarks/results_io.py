"""What writing and reading a large results file costs: CPU of dump + atomic write, and of read
(JSON parse + every value checked against the model), for an 80K-item samples run.

    python benchmarks/results_io.py [--items 80000] [--repeats 3]

The items are tests/data/results-main-samples.json's, repeated with new case ids; the gate,
run and baseline sections are that file's. Printed: the median CPU seconds (user + sys of this
process, the only one) of each step over the repeats, and the file's size.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orbench_pytest.reports.results import read_results, write_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=80_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    seed = read_results(REPO / "tests" / "data" / "results-main-samples.json").document
    items = [dataclasses.replace(item, case_id=f"{item.case_id}-{n}")
             for n in range(args.items // len(seed.items) + 1) for item in seed.items]
    document = dataclasses.replace(seed, items=items[:args.items])
    writes, reads = [], []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "orbench-results.json"
        for _ in range(args.repeats):
            start = time.process_time()
            write_results(path, document)
            writes.append(time.process_time() - start)
            start = time.process_time()
            run = read_results(path)
            reads.append(time.process_time() - start)
            assert run.document == document
        size = path.stat().st_size
    print(f"{args.items} items, {size / 1e6:.1f} MB: write {statistics.median(writes):.2f} s CPU, "
          f"read {statistics.median(reads):.2f} s CPU (median of {args.repeats})")


if __name__ == "__main__":
    main()
