"""The console's "try this tool" form fields: one field a plain property, a JSON text area
otherwise, and the arguments read back typed as the schema says."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.gateway_error import GatewayError
from gateway.http.console.argument_fields import arguments_of, fields_html

PLAIN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "loud": {"type": "boolean"},
        "note": {"type": "string", "default": "none"},
    },
    "required": ["text", "count"],
}
NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string"}}},
}


def test_plain_properties_are_fields_read_back_typed() -> None:
    html = fields_html(PLAIN, {"arg:text": "<b>"})
    for name in ("text", "count", "ratio", "loud", "note"):
        assert f'name="arg:{name}"' in html
    assert "&lt;b&gt;" in html and "<b>" not in html  # what was posted, escaped
    form = {"arg:text": "", "arg:count": "3", "arg:ratio": "0.5", "arg:loud": "on", "arg:note": ""}
    assert arguments_of(PLAIN, form) == {"text": "", "count": 3, "ratio": 0.5, "loud": True}
    # Not a number: passed on as typed, for the pipeline to refuse naming the field.
    assert arguments_of(PLAIN, {"arg:text": "x", "arg:count": "three"})["count"] == "three"


def test_other_schemas_get_a_json_text_area() -> None:
    html = fields_html(NESTED, {})
    assert 'name="arguments_json"' in html and "arg:" not in html
    assert arguments_of(NESTED, {"arguments_json": '{"items": ["a"]}'}) == {"items": ["a"]}
    with pytest.raises(GatewayError) as not_json:
        arguments_of(NESTED, {"arguments_json": "{items"})
    assert not_json.value.error.code.value == "PARSE_ERROR"
    with pytest.raises(GatewayError) as not_object:
        arguments_of(NESTED, {"arguments_json": "[1]"})
    assert not_object.value.error.code.value == "INVALID_ARGUMENTS"
