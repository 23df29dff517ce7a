"""How `/mcp` names the resources of its MCP sources, so two sources never collide.

A resource keeps its source's own URI when it is the only one the caller sees with that
URI. When two or more sources the caller sees list the same URI, each is listed under a URI
that names its source: `conclave://<source>/<its own URI>` (for example
`conclave://docs/file:///README.md`). A resource template follows the same rule with its
`uriTemplate`. The `conclave://<source>/` form reads any resource of a source the caller
sees, colliding or not; a read maps it back to the source's own URI.

`resolve` finds the source a read (or a subscription) goes to: the named source for the
`conclave://` form; else the one source listing the URI; else the one source with a template
the URI matches (`resource_templates`). Two sources that could answer a plain URI is a
refusal naming both qualified forms, never a silent pick.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.mcp_state.mcp_sources import McpSource, source_named
from gateway.mcp_state.resource_templates import matches_template
from protocol import ErrorCode

SOURCE_PREFIX = "conclave://"


def qualified(source: str, uri: str) -> str:
    """The URI that names `source`'s resource `uri`."""
    return f"{SOURCE_PREFIX}{source}/{uri}"


def split_qualified(uri: str) -> tuple[str, str] | None:
    """(source, its own URI) for a `conclave://<source>/<uri>`; None for any other URI."""
    if not uri.startswith(SOURCE_PREFIX):
        return None
    source, slash, own = uri[len(SOURCE_PREFIX) :].partition("/")
    return (source, own) if slash and source and own else None


def listed_resources(sources: Sequence[McpSource]) -> list[dict[str, Any]]:
    """Every resource of `sources`, each under the URI it is served as."""
    counts = Counter(uri for s in sources for uri in s.resources)
    return [
        {**resource, "uri": uri if counts[uri] == 1 else qualified(source.name, uri)}
        for source in sources
        for uri, resource in source.resources.items()
    ]


def listed_templates(sources: Sequence[McpSource]) -> list[dict[str, Any]]:
    """Every resource template of `sources`, each under the `uriTemplate` it is served as."""
    counts = Counter(t["uriTemplate"] for s in sources for t in s.templates)
    listed = []
    for source in sources:
        for template in source.templates:
            own = template["uriTemplate"]
            served = own if counts[own] == 1 else qualified(source.name, own)
            listed.append({**template, "uriTemplate": served})
    return listed


def resolve(sources: Sequence[McpSource], uri: str) -> tuple[McpSource, str]:
    """The source a resource URI (as served) goes to, and the source's own URI for it."""
    named = split_qualified(uri)
    if named is not None:
        source = source_named(sources, named[0])
        if source is None:
            raise _not_found(uri)
        return source, named[1]
    owners = [s for s in sources if uri in s.resources]
    if not owners:
        owners = [s for s in sources if any(matches_template(t, uri) for t in s.templates)]
    if not owners:
        raise _not_found(uri)
    if len(owners) > 1:
        raise _ambiguous(uri, owners)
    return owners[0], uri


def resolve_template(sources: Sequence[McpSource], template: str) -> tuple[McpSource, str]:
    """The source whose resource template is served as `template`, and its own spelling."""
    named = split_qualified(template)
    if named is not None:
        source = source_named(sources, named[0])
        if source is not None and any(t["uriTemplate"] == named[1] for t in source.templates):
            return source, named[1]
        raise _not_found(template, "resource template", "resources/templates/list")
    owners = [s for s in sources if any(t["uriTemplate"] == template for t in s.templates)]
    if not owners:
        raise _not_found(template, "resource template", "resources/templates/list")
    if len(owners) > 1:
        raise _ambiguous(template, owners)
    return owners[0], template


def _not_found(uri: str, what: str = "resource", lister: str = "resources/list") -> GatewayError:
    return GatewayError.of(
        ErrorCode.NOT_FOUND,
        f"no {what} {uri[:200]!r} here; {lister} names them",
        param_hints={"uri": f"a URI {lister} names"},
    )


def _ambiguous(uri: str, owners: Sequence[McpSource]) -> GatewayError:
    names = [qualified(s.name, uri) for s in owners]
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"{uri[:200]!r} is served by {len(owners)} sources; name one: {', '.join(names)}",
        param_hints={"uri": f"one of {', '.join(names)}"},
        details={"sources": [s.name for s in owners]},
    )


__all__ = [
    "SOURCE_PREFIX",
    "listed_resources",
    "listed_templates",
    "qualified",
    "resolve",
    "resolve_template",
    "split_qualified",
]
