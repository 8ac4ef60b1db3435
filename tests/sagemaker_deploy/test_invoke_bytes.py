"""`invoke` against an endpoint that answers bytes which are not UTF-8 JSON: a DeployError, never a traceback.

moto's runtime mock can only answer text, so a small real HTTP server plays the SageMaker runtime
here: boto3 sends real signed requests and parses real responses (the stream in AWS's binary
event-stream framing, built by tests.moto_sagemaker.event_message).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from sagemaker_deploy.actions import invoke, invoke_stream
from sagemaker_deploy.aws import Clients, DeployError
from sagemaker_deploy.streaming import StreamParser, Token, Unreadable
from tests.moto_sagemaker import event_message

NOT_UTF8 = b'{"generated_text": "caf\xe9"}'  # Latin-1 é: what a misconfigured proxy might send
ANSWERS: dict[str, bytes] = {}  # endpoint name → the raw body (unary) or one PayloadPart (stream)


class _Runtime(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        endpoint = self.path.split("/")[2]
        if self.path.endswith("/invocations-response-stream"):
            body = event_message("PayloadPart", ANSWERS[endpoint])
            content_type = "application/vnd.amazon.eventstream"
        else:
            body, content_type = ANSWERS[endpoint], "application/json"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def clients() -> Iterator[Clients]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Runtime)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=f"http://127.0.0.1:{server.server_address[1]}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    try:
        yield Clients(sagemaker=None, runtime=runtime, s3=None, region="us-east-1")
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (NOT_UTF8, "answered with bytes that are not UTF-8 (invalid continuation byte at byte 23)"),
        (b"[" * 100_000, "answered with non-JSON"),
        (b'{"n": ' + b"9" * 5000 + b"}", "answered with non-JSON"),
        (b"<html>bad gateway</html>", "answered with non-JSON"),
    ],
    ids=["not UTF-8", "absurd nesting", "5000-digit integer", "HTML"],
)
def test_unary_answer_that_is_not_utf8_json_is_a_deploy_error(clients: Clients, raw: bytes, message: str) -> None:
    ANSWERS["unary"] = raw
    with pytest.raises(DeployError, match=r"^endpoint unary ") as caught:
        invoke(clients, "unary", b'{"inputs": "q"}')
    assert message in str(caught.value)


def test_a_stream_line_that_is_not_utf8_is_a_deploy_error(clients: Clients) -> None:
    ANSWERS["stream"] = b'{"token": {"text": "a"}}\n' + NOT_UTF8 + b"\n"
    out = io.StringIO()
    with pytest.raises(DeployError, match="stream is unreadable: a line is not UTF-8"):
        invoke_stream(clients, "stream", b'{"inputs": "q", "stream": true}', out=out)
    assert out.getvalue() == "a"  # tokens before the bad line were shown


@pytest.mark.parametrize(
    ("line", "events"),
    [
        (NOT_UTF8, [Unreadable("a line is not UTF-8 (invalid continuation byte at byte 23): " + repr(NOT_UTF8))]),
        (b"[" * 100_000, [Unreadable("not a JSON line: " + repr("[" * 200))]),
        (b'{"choices": [1, {"delta": "x"}, {"delta": {"content": 7}}, {"text": "ok"}]}', [Token("ok")]),
    ],
    ids=["not UTF-8", "absurd nesting", "odd OpenAI shapes carry no text"],
)
def test_stream_parser_never_raises_on_odd_lines(line: bytes, events: list[object]) -> None:
    assert list(StreamParser().feed(line + b"\n")) == events
