"""TCP ports: one read from text, and a free one on the loopback interface. Standard library only: the GPU host's
scripts import it without the resolver's dependencies (benchmarks/serving/h200_middleware_check.py)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it later, so another process may take it in between)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


PORT_RANGE = "1-65535"


def parse_port(text: str) -> int | None:
    """`text` as a TCP port (1-65535), or None when it is not one; each caller words its own refusal."""
    # isdigit() alone is true for '²' and '٣', which int() then rejects or reads as a number.
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        return None
    return int(text)
