"""Count Triton compilations and cache loads in this process: the tuner's check that its ahead-of-time compiles hit,
and the GPU check that the baked cache leaves nothing to compile (tools/aot_check.py)."""

from __future__ import annotations

from typing import Any


class CompileCounter:
    """Counts Triton compilations (cache misses) and cache loads in this process, per kernel name.

    Uses Triton's ``knobs.compilation.listener``, which ``compile()`` calls with ``cache_hit`` on both
    outcomes. In-memory hits of an already loaded kernel do not reach ``compile()`` and are not counted.
    """

    def __init__(self) -> None:
        self.misses: dict[str, int] = {}
        self.hits: dict[str, int] = {}
        self._old: Any = None

    def __call__(self, *, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: bool) -> None:
        name = getattr(src, "name", "?")
        book = self.hits if cache_hit else self.misses
        book[name] = book.get(name, 0) + 1

    def __enter__(self) -> CompileCounter:
        from triton import knobs

        self._old = knobs.compilation.listener
        knobs.compilation.listener = self
        return self

    def __exit__(self, *exc: object) -> None:
        from triton import knobs

        knobs.compilation.listener = self._old
