"""Hide secrets (API keys, hub tokens) in everything that shows a plan: logs, tables, JSON.

A plan carries `--api-key sk-…` / `--hf-token hf_…` in its argv when option.api_key / option.hf_token
(or OPTION_API_KEY / OPTION_HF_TOKEN) are set, and its environment can carry HF_TOKEN and the like.
The argv given to exec stays intact; only what is printed goes through here.

Which names are secret, by word (split on "-" and "_"), so that counts and paths stay visible:
- a flag whose LAST word ends in token/key/secret/password/credential(s): --api-key, --hf-token;
  not --max-num-batched-tokens, --dbo-decode-token-threshold, --ssl-keyfile, --tokenizer.
- an environment name with ANY word ending so: HF_TOKEN, AWS_SECRET_ACCESS_KEY, VLLM_API_KEY,
  HUGGING_FACE_HUB_TOKEN; not TOKENIZERS_PARALLELISM.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

REDACTED = "***"
_SECRET_SUFFIXES = ("token", "key", "secret", "password", "passwd", "credential", "credentials")
# A secret shorter than this is not searched for in free text (reasons): it would blank out
# ordinary words; it is still hidden where it stands as a flag value or an env value.
_MIN_SCRUB_CHARS = 4


def _words(name: str) -> list[str]:
    return [word for word in re.split(r"[-_]+", name.lower()) if word]


def is_secret_flag(arg: str) -> bool:
    """True for `--api-key`, `--hf-token` (also in the `--flag=value` form)."""
    if not arg.startswith("--"):
        return False
    words = _words(arg[2:].split("=", 1)[0])
    return bool(words) and words[-1].endswith(_SECRET_SUFFIXES)


def is_secret_env(name: str) -> bool:
    """True for HF_TOKEN, AWS_SECRET_ACCESS_KEY, VLLM_API_KEY, DB_PASSWORD, …"""
    return any(word.endswith(_SECRET_SUFFIXES) for word in _words(name))


def _secret_arg_values(args: Sequence[str]) -> dict[int, str]:
    """Index of each argv element that holds a secret flag's value → that value.

    The value is in the element itself for `--flag=value`, else it is the next element unless that is
    another flag: a boolean flag such as vLLM's bare `--hf-token` (use the cached login) takes none,
    and the next flag must stay readable.
    """
    found: dict[int, str] = {}
    for i, arg in enumerate(args):
        if not is_secret_flag(arg):
            continue
        if "=" in arg:
            found[i] = arg.split("=", 1)[1]
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            found[i + 1] = args[i + 1]
    return found


def secret_values(args: Sequence[str], env: Mapping[str, str]) -> set[str]:
    """The values redact_args / redact_env hide, to scrub them from free text as well."""
    values = {value for name, value in env.items() if is_secret_env(name)}
    values.update(_secret_arg_values(args).values())
    return {value for value in values if value}


def redact_args(args: Sequence[str]) -> list[str]:
    """The argv with each secret flag's value replaced by *** (`--flag=***` in the one-element form)."""
    hidden = _secret_arg_values(args)
    return [
        (arg.split("=", 1)[0] + "=" + REDACTED if arg.startswith("--") else REDACTED) if i in hidden else arg
        for i, arg in enumerate(args)
    ]


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with each secret-named variable's value replaced by ***."""
    return {name: REDACTED if is_secret_env(name) else value for name, value in env.items()}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a (long enough) secret value replaced by ***."""
    for secret in sorted(secrets, key=len, reverse=True):  # longest first: one secret may contain another
        if len(secret) >= _MIN_SCRUB_CHARS:
            text = text.replace(secret, REDACTED)
    return text
