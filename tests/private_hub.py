"""A private Hugging Face hub repository served on 127.0.0.1, for the real `huggingface_hub` client.

It answers the three requests the client makes for a model (`HEAD`/`GET /{repo}/resolve/{revision}/{file}` and
`GET /api/models/{repo}/revision/{revision}` for a snapshot) only with `Authorization: Bearer {token}`; without it,
401 with the hub's `X-Error-Code: RepoNotFound`, as the hub answers for a private repository. What each request
carried is recorded as "token" (the repository's), "other" (any other token: never stored, so a machine's real token
cannot end up in a test's output) or None, so a test can tell which token reached the hub.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "c" * 40


@dataclass
class PrivateRepo:
    repo: str
    token: str
    files: dict[str, bytes]
    seen_tokens: list[str | None] = field(default_factory=list)  # "token", "other" or None per request
    endpoint: str = ""


def _handler(repo: PrivateRepo) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def _authorised(self) -> bool:
            auth = self.headers.get("Authorization") or ""
            token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
            repo.seen_tokens.append(None if token is None else "token" if token == repo.token else "other")
            if token == repo.token:
                return True
            self._send(401, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"})
            return False

        def _send(self, status: int, body: bytes, headers: dict[str, str], *, head: bool = False) -> None:
            self.send_response(status)
            for key, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _file(self, head: bool) -> None:
            prefix = f"/{repo.repo}/resolve/"
            path = unquote(self.path.split("?")[0])
            if not path.startswith(prefix):
                self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"}, head=head)
                return
            if not self._authorised():
                return
            name = path[len(prefix) :].split("/", 1)[1]
            body = repo.files.get(name)
            if body is None:
                self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"}, head=head)
                return
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            self._send(200, body, {"X-Repo-Commit": COMMIT, "ETag": etag}, head=head)

        def do_HEAD(self) -> None:
            self._file(head=True)

        def do_GET(self) -> None:
            if self.path.startswith(f"/api/models/{repo.repo}/revision/"):
                if self._authorised():
                    info = {"id": repo.repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in repo.files]}
                    self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})
                return
            self._file(head=False)

    return Handler


@contextmanager
def private_hub(repo: str, token: str, files: dict[str, bytes]) -> Iterator[PrivateRepo]:
    """Serve ``files`` as private hub repository ``repo`` on 127.0.0.1 while the block runs; HF_ENDPOINT is
    ``.endpoint``."""
    state = PrivateRepo(repo, token, files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
