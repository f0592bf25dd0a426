"""Which Batch API batch answers which request set: a small JSON file beside the cache.

A request set is named by a hash of the endpoint and its sorted custom_ids, so a rerun (or a
later CI job with the same cache) that would submit the same requests finds the batch already
submitted and resumes waiting for it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orbench_pytest.core.artefacts import replace_text
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import shown_url


def state_path(cache_path: Path) -> Path:
    return cache_path.with_name(cache_path.name + ".batches.json")


def request_set_key(base_url: str, custom_ids: Iterable[str]) -> str:
    """The endpoint as shown_url gives it: no password hashed in, and a URL without userinfo
    or query keys as it always did."""
    digest = hashlib.sha256(shown_url(base_url).encode("utf-8"))
    for custom_id in sorted(custom_ids):
        digest.update(b"\n" + custom_id.encode("utf-8"))
    return digest.hexdigest()


class BatchState:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:  # deep nesting too
            why = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise ConfigError(f"{self.path}: unreadable batch state ({why}); delete it to "
                              "submit again") from None
        return data if isinstance(data, dict) else {}

    def batch_ids(self, set_key: str) -> list[str]:
        """The batches submitted for this request set, in submission order (none: [])."""
        entry = self._read().get(set_key)
        found = entry.get("batch_ids") if isinstance(entry, dict) else None
        if not isinstance(found, list):
            return []
        return [batch_id for batch_id in found if isinstance(batch_id, str)]

    def remember(self, set_key: str, batch_ids: list[str], requests: int) -> None:
        data = self._read()
        data[set_key] = {"batch_ids": list(batch_ids), "requests": requests,
                         "submitted": round(time.time())}
        self._write(data)

    def forget(self, set_key: str) -> None:
        data = self._read()
        if data.pop(set_key, None) is not None:
            self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        """Atomically: a kill mid-write leaves the old file, never half a file."""
        try:
            replace_text(self.path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot write the batch state ({exc.strerror}); "
                              "the batch id would be lost") from None
