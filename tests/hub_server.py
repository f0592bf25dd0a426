"""A local HTTP server that answers like the Hugging Face hub's file-resolve endpoint.

`/datasets/OWNER/NAME/resolve/REVISION/PATH` answers 302 to a CDN-like path (`/cdn/<sha256>`)
with the file's sha256 in X-Linked-Etag, as the hub does for LFS files; the CDN path serves the
bytes. Unknown files get 404; gated files get 401 without the right Bearer token; files marked
`cut_short` announce their full Content-Length, send half and close the connection.
`/raw/OWNER/NAME/REVISION/PATH` serves the same files directly, like GitHub's raw host.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import unquote, urlsplit

from tests.timeouts import THREAD_TIMEOUT_S


@dataclass
class HostedFile:
    data: bytes
    token: str | None = None  # gated: only this Bearer token may read it
    cut_short: bool = False
    linked_etag: str | None = None  # overrides the advertised sha256 ("": none is sent)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


class HubServer:
    def __init__(self) -> None:
        self.files: dict[str, HostedFile] = {}  # "OWNER/NAME/REVISION/PATH" → file
        self.requests: Counter[str] = Counter()  # path (without query) → times asked
        self.auth_seen: list[str | None] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo: str, revision: str, path: str, data: bytes, **options: object) -> str:
        """Host `data`; returns its hf:// source string."""
        self.files[f"{repo}/{revision}/{path}"] = HostedFile(data, **options)  # type: ignore[arg-type]
        return f"hf://datasets/{repo}@{revision}/{path}"

    def raw_url(self, repo: str, revision: str, path: str) -> str:
        """The same file at a plain URL, as GitHub's raw host serves it."""
        return f"{self.endpoint}/raw/{repo}/{revision}/{path}"

    def resolve_url(self, repo: str, revision: str, path: str) -> str:
        return f"{self.endpoint}/datasets/{repo}/resolve/{revision}/{path}"

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=THREAD_TIMEOUT_S)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests[path] += 1
                hub.auth_seen.append(self.headers.get("Authorization"))
                if path.startswith("/datasets/") and "/resolve/" in path:
                    self._resolve(path)
                elif path.startswith("/raw/"):  # like raw.githubusercontent.com: no redirect
                    self._raw(path.removeprefix("/raw/"))
                elif path.startswith("/cdn/"):
                    self._cdn(path.removeprefix("/cdn/"))
                else:
                    self._plain(404, b"not found")

            def _resolve(self, path: str) -> None:
                repo, _, rest = path.removeprefix("/datasets/").partition("/resolve/")
                hosted = hub.files.get(f"{repo}/{rest}")
                if hosted is None:
                    self._plain(404, b"Entry not found", {"X-Error-Code": "EntryNotFound"})
                    return
                if hosted.token is not None and \
                        self.headers.get("Authorization") != f"Bearer {hosted.token}":
                    self._plain(401, b"Access to this dataset is restricted",
                                {"X-Error-Code": "GatedRepo"})
                    return
                etag = hosted.sha256 if hosted.linked_etag is None else hosted.linked_etag
                self.send_response(302)
                self.send_header("Location", f"/cdn/{hosted.sha256}?X-Amz-Signature=abc")
                if etag:
                    self.send_header("X-Linked-Etag", f'"{etag}"')
                self.send_header("X-Linked-Size", str(len(hosted.data)))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _raw(self, key: str) -> None:
                hosted = hub.files.get(key)
                if hosted is None:
                    self._plain(404, b"404: Not Found")
                    return
                self._body(hosted)

            def _cdn(self, digest: str) -> None:
                hosted = next((f for f in hub.files.values() if f.sha256 == digest), None)
                if hosted is None:
                    self._plain(404, b"no such object")
                    return
                self._body(hosted)

            def _body(self, hosted: HostedFile) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/csv")
                self.send_header("Content-Length", str(len(hosted.data)))
                self.end_headers()
                body = hosted.data[: len(hosted.data) // 2] if hosted.cut_short else hosted.data
                self.wfile.write(body)
                self.wfile.flush()
                if hosted.cut_short:
                    self.close_connection = True

            def _plain(self, status: int, body: bytes,
                       headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
