"""Hide secrets (API keys, hub tokens) in everything that shows a plan: logs, tables, JSON.

A plan carries `--api-key sk-…` / `--hf-token hf_…` in its argv when option.api_key / option.hf_token
(or OPTION_API_KEY / OPTION_HF_TOKEN) are set, and its environment can carry HF_TOKEN and the like.
The argv given to exec stays intact; only what is printed goes through here.

Which names are secret, by word (split on "-" and "_"), so that counts and paths stay visible:
- a flag whose LAST word ends in token/key/secret/password/credential(s): --api-key, --hf-token;
  not --max-num-batched-tokens, --dbo-decode-token-threshold, --ssl-keyfile, --tokenizer.
- an environment name with ANY word ending so: HF_TOKEN, AWS_SECRET_ACCESS_KEY, VLLM_API_KEY,
  HUGGING_FACE_HUB_TOKEN; not TOKENIZERS_PARALLELISM.
- inside another value: a JSON option (`--hf-overrides '{"api_key": "…"}'`) has the values of its
  secret-named keys hidden, at any depth, by the env-name rule; and a known secret value (from a secret
  flag or env) is hidden wherever else it appears (a URL, another option, a reason line).
- a URL's userinfo, in any argv element, env value or reason line (and in a refused model source's error,
  entrypoint.model.sources): `scheme://user:PASSWORD@host` shows `scheme://user:***@host`, and `scheme://TOKEN@host`
  (no colon: the one part is as likely a token as a user name) shows `scheme://***@host`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "***"
_SECRET_SUFFIXES = ("token", "key", "secret", "password", "passwd", "credential", "credentials")
# A secret shorter than this is not searched for in free text (reasons): it would blank out
# ordinary words; it is still hidden where it stands as a flag value or an env value.
_MIN_SCRUB_CHARS = 4
# `scheme://userinfo@`: the authority ends at / ? # (RFC 3986), and also at whitespace, quotes and <> so that the match
# never runs out of a URL inside JSON, a repr or a sentence. Greedy up to the authority's LAST @, as urllib splits
# netloc: a password with a raw @ in it is still hidden whole.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s\"'<>]*)@")


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


def is_secret_label(label: str) -> bool:
    """Whether an error's key label names a secret option or variable: `option.hf_token`, `OPTION_API_KEY
    (option.api_key)`, `option.hf_token (in /path/serving.properties)` (the label's first word, or an option name in
    it; not the words of a file path)."""
    words = [word.strip("()") for word in label.split()]
    names = [words[0]] + [w for w in words[1:] if w.lower().startswith(("option.", "option_"))] if words else []
    return any(is_secret_env(name) for name in names)


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


def _redact_json(node: Any) -> tuple[Any, bool]:
    """(node with every secret-named key's value ***, whether anything was hidden)."""
    if isinstance(node, dict):
        changed, out = False, {}
        for key, value in node.items():
            if isinstance(key, str) and is_secret_env(key) and value not in (None, ""):
                out[key], changed = REDACTED, True
            else:
                out[key], hid = _redact_json(value)
                changed |= hid
        return out, changed
    if isinstance(node, list):
        items = [_redact_json(item) for item in node]
        return [item for item, _ in items], any(hid for _, hid in items)
    return node, False


def redact_json_value(value: str) -> str:
    """A JSON object/array option with its secret-named keys' values hidden; anything else unchanged."""
    if not value.lstrip().startswith(("{", "[")):
        return value
    try:
        node = json.loads(value)
    except ValueError:
        return value
    hidden, changed = _redact_json(node)
    return json.dumps(hidden, separators=(",", ":")) if changed else value


def _mask_userinfo(match: re.Match[str]) -> str:
    if not match["userinfo"]:
        return match[0]  # `scheme://@host`: nothing to hide
    user, colon, _password = match["userinfo"].partition(":")
    # keep the user name where a password follows it (it says which account); a lone part may itself be the token
    shown = f"{user}:{REDACTED}" if colon else REDACTED
    return f"{match['scheme']}{shown}@"


def redact_url_userinfo(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` URL in it ***, or the whole userinfo when it has no
    colon (`https://TOKEN@host`); the rest of each URL, and any text around it, is unchanged."""
    return _URL_USERINFO.sub(_mask_userinfo, text) if "://" in text else text


def _hide_inside(value: str, secrets: Sequence[str]) -> str:
    """A value that is not itself secret, with secrets inside it hidden (JSON keys, URL passwords, known values)."""
    return scrub(redact_url_userinfo(redact_json_value(value)), secrets)


def redact_args(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """The argv with each secret flag's value replaced by *** (`--flag=***` in the one-element form),
    secret keys inside JSON values hidden, and the known `secrets` scrubbed from every other element."""
    hidden = _secret_arg_values(args)
    secrets = tuple(secrets)
    out = []
    for i, arg in enumerate(args):
        if i in hidden:
            out.append(arg.split("=", 1)[0] + "=" + REDACTED if arg.startswith("--") else REDACTED)
        elif arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            out.append(flag + "=" + _hide_inside(value, secrets))
        else:
            out.append(_hide_inside(arg, secrets))
    return out


def redact_env(env: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """The environment with each secret-named variable's value replaced by ***, secret keys inside JSON
    values hidden, and the known `secrets` scrubbed from the other values."""
    secrets = tuple(secrets)
    return {name: REDACTED if is_secret_env(name) else _hide_inside(value, secrets) for name, value in env.items()}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a (long enough) secret value replaced by ***."""
    for secret in sorted(secrets, key=len, reverse=True):  # longest first: one secret may contain another
        if len(secret) >= _MIN_SCRUB_CHARS:
            text = text.replace(secret, REDACTED)
    return text
