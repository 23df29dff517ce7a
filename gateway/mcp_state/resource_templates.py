"""Resource templates (RFC 6570 URI templates) of the MCP sources: which concrete URI a
template covers, so a read of `test://items/42/data` goes to the source that lists
`test://items/{id}/data`.

The matching covers what MCP servers publish: literal text and expressions `{name}` (one
path segment: no `/`, the way FastMCP and the SDKs match), `{+name}`, `{#name}` and
`{name*}` (any text, `/` too), `{/name}`, `{?a,b}` and `{&a}` (their RFC 6570 expansions).
A template that cannot be parsed matches nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^{}]*)\}")


def matches_template(template: dict[str, Any], uri: str) -> bool:
    """Whether `uri` is one of the URIs the listed `template` describes."""
    pattern = _compiled(str(template.get("uriTemplate", "")))
    return pattern is not None and pattern.fullmatch(uri) is not None


@lru_cache(maxsize=1024)
def _compiled(template: str) -> re.Pattern[str] | None:
    parts: list[str] = []
    at = 0
    for expression in _EXPRESSION.finditer(template):
        literal = template[at : expression.start()]
        if "{" in literal or "}" in literal:
            return None
        parts.append(re.escape(literal))
        parts.append(_expansion(expression.group(1), expression.group(2)))
        at = expression.end()
    rest = template[at:]
    if "{" in rest or "}" in rest:
        return None
    parts.append(re.escape(rest))
    return re.compile("".join(parts))


def _expansion(operator: str, variables: str) -> str:
    explode = variables.endswith("*")
    if operator in ("+", "#"):
        return re.escape(operator if operator == "#" else "") + ".*"
    if operator == "":
        return ".+" if explode else "[^/]+"
    if operator in ("/", "."):
        return f"(?:{re.escape(operator)}[^/?#]*)*"
    return r"(?:[?&;][^#]*)?"  # query forms ({?a,b}, {&a}, {;a}): any query text or none


__all__ = ["matches_template"]
