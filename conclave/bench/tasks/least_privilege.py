"""Least privilege for AgentDojo tasks: the tools a task's user prompt calls for.

The rule, which reads only the prompt and the suite's tool list (never the ground truth):

1. Every read-only tool is allowed: its name starts with `get_`, `read_`, `search_`,
   `list_`, `find_` or `check_`.
2. Any other tool is allowed when a word of its name (split on `_`) matches a word of the
   prompt: equal after lower-casing and dropping a trailing "s", "es", "ed" or "ing", or one
   of the few verb pairs in `_SAME` (a user says "pay", the tool says "send money").
3. Everything else is refused by the agent's token (the gateway answers `FORBIDDEN`).

Prompt words are what the user asked for; an injection arrives later, in a tool result,
and cannot widen a token issued before the task starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

READ_ONLY_PREFIXES = ("get_", "read_", "search_", "list_", "find_", "check_")
_SAME = {  # prompt word -> tool-name word meaning the same action
    "pay": "send",
    "refund": "send",
    "transfer": "send",
    "email": "send",
    "message": "send",
    "invite": "invite",
    "schedule": "create",
    "book": "reserve",
    "remind": "create",
    "write": "create",
    "share": "share",
    "post": "post",
    "change": "update",
    "adjust": "update",
    "edit": "update",
    "add": "add",
    "remove": "remove",
    "delete": "delete",
    "cancel": "cancel",
    "reschedule": "reschedule",
}
_WORD = re.compile(r"[a-z]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def allowed_tools(prompt: str, tools: Iterable[str]) -> list[str]:
    """The tools (function names) of `tools` that the rule above allows for `prompt`."""
    words = {_stem(w) for w in _WORD.findall(prompt.lower())}
    words |= {_SAME[w] for w in _WORD.findall(prompt.lower()) if w in _SAME}
    allowed = []
    for name in tools:
        parts = {_stem(p) for p in name.lower().split("_") if len(p) >= 3}
        if name.startswith(READ_ONLY_PREFIXES) or parts & words:
            allowed.append(name)
    return allowed
