"""Reading a command line that is already a list (vLLM's argv): standard library only, so that the code inside vLLM's
processes (entrypoint.lmi, the warm-up) can use it without the planning side."""

from __future__ import annotations

from collections.abc import Sequence


def flag_value(argv: Sequence[str], name: str) -> str | None:
    """The value of `name` (say --max-num-seqs) in an argv, as `--name V` or `--name=V`; None when absent."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None
