"""The reference tables in docs/, generated from the code that acts on them.

- docs/configuration.md: the options, aliases and keys, from entrypoint.config.lmi_options (LMI_OPTIONS and
  its sibling tables) and entrypoint.config.moe;
- docs/resolver-rules.md: the resolver's rules, from entrypoint.resolve.rules (RULES), and the pre-0.17
  switches, from entrypoint.resolve.backend_switch.

Only the text between a `<!-- BEGIN GENERATED name ... -->` and its `<!-- END GENERATED name -->` is
generated; the prose around it is written by hand.

    python -m tools.docs_tables --write   # regenerate every generated section
    python -m tools.docs_tables --check   # exit 1 naming each stale file (tests/tools/test_docs_tables.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from entrypoint.config.lmi_options import (
    CUDA_GRAPHS_ENV,
    DTYPE_NAMES,
    ENGINE_VALUES,
    ENV_SERVER_ALIASES,
    LEGACY_OPTIONS,
    LMI_OPTIONS,
    RESERVED_ARGS,
    SERVER_KEYS,
)
from entrypoint.config.moe import MoeBackend, MoeKernel
from entrypoint.config.response_format import OUTPUT_FORMATTERS
from entrypoint.config.warmup import Warmup
from entrypoint.resolve.backend_switch import PRE_017_BACKEND_ENV
from entrypoint.resolve.rules import RULES

REPO = Path(__file__).resolve().parents[1]
COMMAND = "python -m tools.docs_tables --write"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _codes(values: Iterable[str]) -> str:
    return ", ".join(f"`{value}`" for value in values)


# ------------------------------------------------------------------------------------ configuration


def options_section() -> str:
    rows = [(f"`option.{option.key}`", _codes(option.env), option.becomes, option.notes) for option in LMI_OPTIONS]
    return _table(("key", "environment (when the option is unset; first set wins)", "becomes", "notes"), rows)


def values_section() -> str:
    dtypes = {}
    for spelling, vllm_name in DTYPE_NAMES.items():
        dtypes.setdefault(vllm_name, []).append(spelling)
    rows = [
        ("`option.moe_backend`", _codes(backend.value for backend in MoeBackend)),
        ("`option.moe_kernel`", _codes(kernel.value for kernel in MoeKernel)),
        ("`option.warmup`", _codes([*(value.value for value in Warmup), "true", "false"])),
        ("`option.tgi_compat`", _codes(["false", "true"])),
        ("`option.output_formatter`", _codes(OUTPUT_FORMATTERS)),
        *((f"`option.dtype` → `{name}`", _codes(spellings)) for name, spellings in dtypes.items()),
        (f"`{CUDA_GRAPHS_ENV}`", "`true`, `false` (the opposite of `option.enforce_eager`)"),
    ]
    return _table(("option", "accepted values"), rows)


def reserved_section() -> str:
    return _table(("option", "refused because"), ((f"`option.{key}`", why) for key, why in RESERVED_ARGS.items()))


def ignored_section() -> str:
    server_env = ", ".join(f"`{env}` (`{key}`)" for env, key in ENV_SERVER_ALIASES)
    rows = [
        ("legacy LMI options", _codes(f"option.{key}" for key in sorted(LEGACY_OPTIONS))),
        ("server keys (no `option.` prefix)", _codes(sorted(SERVER_KEYS))),
        ("server key variables", server_env),
        ("`engine` values", _codes(ENGINE_VALUES)),
    ]
    return _table(("accepted, listed as ignored", "keys"), rows)


# ------------------------------------------------------------------------------------ resolver rules


def rules_section() -> str:
    rows = [
        (
            f"`{rule.id}`",
            rule.condition,
            f"`{rule.backend}`",
            f"`{rule.vllm_default}`",
            "none measured" if rule.max_concurrency is None else f"max_num_seqs ≤ {rule.max_concurrency}",
            rule.why,
            f"[{rule.evidence}]({rule.evidence.removeprefix('docs/')})",  # the table sits in docs/
        )
        for rule in RULES
    ]
    header = ("rule", "when", "passes `--moe-backend`", "vLLM alone picks", "concurrency bound", "why", "evidence")
    return _table(header, rows)


def pre_017_section() -> str:
    rows = [
        (f"`{backend}`", " ".join(f"`{name}={value}`" for name, value in env.items()))
        for backend, env in PRE_017_BACKEND_ENV.items()
    ]
    return _table(("backend", "environment set instead of `--moe-backend`"), rows)


# name → renderer, per generated file (relative to the repository)
SECTIONS: dict[str, dict[str, Callable[[], str]]] = {
    "docs/configuration.md": {
        "options": options_section,
        "values": values_section,
        "reserved": reserved_section,
        "ignored": ignored_section,
    },
    "docs/resolver-rules.md": {"rules": rules_section, "pre-0.17": pre_017_section},
}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN GENERATED {name}: {COMMAND} -->", f"<!-- END GENERATED {name} -->"


def splice(text: str, name: str, body: str) -> str:
    """`text` with the section `name` between its markers replaced by `body`."""
    begin, end = _markers(name)
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no generated section {name!r}: the file needs the lines {begin!r} and {end!r}")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def expected(relative: str, root: Path = REPO) -> str:
    """The file as it should be: its hand-written text with every generated section current."""
    text = (root / relative).read_text(encoding="utf-8")
    for name, render in SECTIONS[relative].items():
        text = splice(text, name, render())
    return text


def stale(root: Path = REPO) -> list[str]:
    return [
        relative for relative in SECTIONS if (root / relative).read_text(encoding="utf-8") != expected(relative, root)
    ]


def main(argv: Sequence[str] | None = None, root: Path = REPO) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs_tables", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the generated sections in place")
    mode.add_argument("--check", action="store_true", help="exit 1 when a generated section is stale")
    args = parser.parse_args(argv)
    if args.write:
        for relative in SECTIONS:
            (root / relative).write_text(expected(relative, root), encoding="utf-8")
            print(f"wrote {relative}")
        return 0
    outdated = stale(root)
    for relative in outdated:
        print(f"{relative} is stale: run `{COMMAND}`", file=sys.stderr)
    return 1 if outdated else 0


if __name__ == "__main__":
    sys.exit(main())
