"""Text that cannot be encoded as UTF-8. Standard library only.

A JSON `\\ud800` escape or a serving.properties `\\ud800` escape not part of a valid pair decodes to a lone UTF-16
surrogate. UTF-8 cannot encode it, so it fails late, wherever the text is next encoded: os.execvpe, a log line,
vLLM's tokenizer.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def find_lone_surrogate(text: str) -> re.Match[str] | None:
    """The first lone surrogate in `text`, or None."""
    # isascii() reads a flag CPython keeps on every str: ASCII text, the usual prompt, costs no scan
    return None if text.isascii() else _SURROGATE.search(text)
