"""A fake OpenAI Files + Batches API on 127.0.0.1, for the submit-and-wait tests.

Routes: POST /v1/files (multipart upload), GET /v1/files/{id}/content, POST /v1/batches,
GET /v1/batches/{id}. Each look at a batch moves it one step along `steps` (by default
validating → in_progress → finalizing → completed); at the last step its output and error
files are made by answering every request line with `answer` (tests.batch_files). A batch
can end `expired` (the first `expire_after` requests answered, the rest batch_expired errors)
or `failed` (no files, the reasons in `errors`).
"""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.batch_files import Answer, output_line
from tests.openai_server import ANSWER_TEXT, Reply
from tests.timeouts import THREAD_TIMEOUT_S

COMPLETED_STEPS = ("validating", "in_progress", "finalizing", "completed")


class BatchServer:
    def __init__(self, answer: Answer = lambda body: Reply(text=ANSWER_TEXT),
                 steps: tuple[str, ...] = COMPLETED_STEPS, expire_after: int | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        self.answer = answer
        self.steps = steps
        self.expire_after = expire_after
        self.errors = errors or []
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.uploads = 0
        self.created = 0
        self.looks = 0
        self.downloads: list[str] = []
        self.chat_requests = 0  # anything asked live (this server answers none)
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> BatchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=THREAD_TIMEOUT_S)

    # --- the API ---------------------------------------------------------------------------
    def upload(self, content_type: str, body: bytes) -> dict[str, Any]:
        message = BytesParser(policy=default_policy).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields: dict[str, bytes] = {}
        for part in message.iter_parts():
            payload = part.get_payload(decode=True)  # a form field's bytes
            assert isinstance(payload, bytes)
            fields[str(part.get_param("name", header="content-disposition"))] = payload
        with self._lock:
            self.uploads += 1
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = fields["file"]
        return _file(file_id, len(fields["file"]), fields["purpose"].decode())

    def create(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.created += 1
            batch_id = f"batch_{self.created}"
            self.batches[batch_id] = {"input": request["input_file_id"], "step": -1,
                                      "endpoint": request["endpoint"], "output": None,
                                      "error": None, "counts": (0, 0, 0)}
        return self.look(batch_id, advance=False)

    def look(self, batch_id: str, advance: bool = True) -> dict[str, Any]:
        with self._lock:
            self.looks += advance
            batch = self.batches[batch_id]
            if advance and batch["step"] < len(self.steps) - 1:
                batch["step"] += 1
                if batch["step"] == len(self.steps) - 1:
                    self._finish(batch_id, batch, self.steps[-1])
            status = self.steps[max(batch["step"], 0)]
            total, done, failed = batch["counts"]
            if status in ("in_progress", "finalizing"):
                total = len(self._requests(batch))
            return {
                "id": batch_id, "object": "batch", "endpoint": batch["endpoint"],
                "input_file_id": batch["input"], "completion_window": "24h", "status": status,
                "created_at": 1700000000, "output_file_id": batch["output"],
                "error_file_id": batch["error"],
                "errors": ({"object": "list", "data": self.errors} if status == "failed"
                           else None),
                "request_counts": {"total": total, "completed": done, "failed": failed},
            }

    def _requests(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        text = self.files[batch["input"]].decode()
        return [json.loads(line) for line in text.splitlines() if line]

    def _finish(self, batch_id: str, batch: dict[str, Any], status: str) -> None:
        if status == "failed":
            return
        requests = self._requests(batch)
        answered: list[str] = []
        errored: list[str] = []
        for index, request in enumerate(requests):
            if self.expire_after is not None and index >= self.expire_after:
                line = output_line(request["custom_id"], {
                    "code": "batch_expired", "message": "This request could not be executed "
                    "before the completion window expired."}, request["body"], index)
            else:
                line = output_line(request["custom_id"], self.answer(request["body"]),
                                   request["body"], index)
            ok = line["response"] is not None and line["response"]["status_code"] == 200
            (answered if ok else errored).append(json.dumps(line) + "\n")
        for name, lines in (("output", answered), ("error", errored)):
            if lines:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(lines).encode()
                batch[name] = file_id
        batch["counts"] = (len(requests), len(answered), len(errored))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _send(self, status: int, body: bytes,
                      content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, data: Any, status: int = 200) -> None:
                self._send(status, json.dumps(data).encode())

            def _not_found(self) -> None:
                self._json({"error": {"message": f"no route {self.path}", "code": None}}, 404)

            def do_GET(self) -> None:
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:2] == ["v1", "batches"] and len(parts) == 3 \
                        and parts[2] in server.batches:
                    self._json(server.look(parts[2]))
                elif (parts[:2] == ["v1", "files"] and len(parts) == 4
                      and parts[3] == "content" and parts[2] in server.files):
                    server.downloads.append(parts[2])
                    self._send(200, server.files[parts[2]], "application/octet-stream")
                else:
                    self._not_found()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/files":
                    self._json(server.upload(self.headers["Content-Type"], body))
                elif path == "/v1/batches":
                    self._json(server.create(json.loads(body)))
                else:
                    server.chat_requests += 1
                    self._not_found()

        return Handler


def _file(file_id: str, size: int, purpose: str) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": size, "created_at": 1700000000,
            "filename": "orbench-requests.jsonl", "purpose": purpose, "status": "processed"}
