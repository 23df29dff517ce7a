"""Which concrete URIs a source's resource template covers (RFC 6570, the forms MCP servers
publish): a read of such a URI goes to that source, any other is not its."""

from __future__ import annotations

import pytest

from gateway.mcp_state.resource_templates import matches_template


@pytest.mark.parametrize(
    ("template", "uri", "covered"),
    [
        ("test://template/{id}/data", "test://template/42/data", True),
        ("test://template/{id}/data", "test://template/4/2/data", False),  # one segment
        ("test://template/{id}/data", "test://template//data", False),  # not empty
        ("test://template/{id}/data", "test://template/42/data/more", False),
        ("file:///{path*}", "file:///a/b/c.txt", True),  # explode: any path
        ("file:///{+path}", "file:///a/b", True),
        ("weather://{city}{?units}", "weather://oslo?units=metric", True),
        ("weather://{city}{?units}", "weather://oslo", True),
        ("docs://{a}.{b}", "docs://x.y", True),  # literal text between expressions
        ("docs://{a}.{b}", "docs://xy", False),
        ("broken://{id", "broken://{id", False),  # not a template: matches nothing
    ],
)
def test_a_template_covers_the_uris_it_describes(template: str, uri: str, covered: bool) -> None:
    assert matches_template({"uriTemplate": template}, uri) is covered
