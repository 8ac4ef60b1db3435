"""A free TCP port on the loopback interface. Standard library only: the GPU host's scripts import it without the
resolver's dependencies (benchmarks/serving/h200_middleware_check.py)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it later, so another process may take it in between)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
