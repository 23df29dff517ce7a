"""A tool's arguments as form fields, from its JSON Schema, and back from the posted form.

A schema whose properties are all plain (string, integer, number, boolean) gets one field a
property (`arg:<name>`); any other gets one JSON text area (`arguments_json`). What comes back
is converted by the property's type where it reads as one and passed on as typed otherwise:
the pipeline validates arguments (once, for every transport) and refuses them with its own
SERF code, so nothing is checked twice here.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.http.console.page_layout import esc
from protocol import ErrorCode

FIELD_PREFIX = "arg:"
JSON_FIELD = "arguments_json"
_PLAIN = frozenset({"string", "integer", "number", "boolean"})


def _properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def plain_fields(schema: dict[str, Any]) -> bool:
    """True when every property can be one form field."""
    properties = _properties(schema)
    return bool(properties) and all(
        isinstance(p, dict) and p.get("type") in _PLAIN for p in properties.values()
    )


def fields_html(schema: dict[str, Any], posted: dict[str, str]) -> str:
    """The form's argument fields, holding what was `posted` last."""
    properties = _properties(schema)
    required = set(schema.get("required") or ())
    if not plain_fields(schema):
        text = posted.get(JSON_FIELD) or "{}"
        hint = json.dumps(schema, indent=1)[:2000]
        return (
            f'<label>Arguments (JSON)<br><textarea name="{JSON_FIELD}" rows="6" cols="70">'
            f"{esc(text)}</textarea></label>"
            f"<details><summary>Input schema</summary><pre>{esc(hint)}</pre></details>"
        )
    rows = []
    for name, prop in properties.items():
        field = FIELD_PREFIX + name
        label = esc(name) + ("" if name not in required else " *")
        kind = prop.get("type")
        if kind == "boolean":
            checked = " checked" if posted.get(field) == "on" else ""
            control = f'<input type="checkbox" name="{esc(field)}"{checked}>'
        elif kind == "string":
            control = (
                f'<textarea name="{esc(field)}" rows="2" cols="60">'
                f"{esc(posted.get(field, ''))}</textarea>"
            )
        else:
            control = f'<input name="{esc(field)}" value="{esc(posted.get(field, ""))}">'
        note = esc(prop.get("description") or kind or "")
        rows.append(f'<p><label>{label} {control}</label> <span class="note">{note}</span></p>')
    return "".join(rows)


def arguments_of(schema: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    """The call's arguments from the posted form; PARSE_ERROR for JSON that does not parse."""
    if not plain_fields(schema):
        try:
            value = json.loads(form.get(JSON_FIELD) or "{}")
        except json.JSONDecodeError as exc:
            raise GatewayError.of(
                ErrorCode.PARSE_ERROR, f"the arguments are not valid JSON: {exc}"
            ) from exc
        if not isinstance(value, dict):
            raise GatewayError.of(
                ErrorCode.INVALID_ARGUMENTS, "the arguments must be a JSON object"
            )
        return value
    required = set(schema.get("required") or ())
    arguments: dict[str, Any] = {}
    for name, prop in _properties(schema).items():
        raw = form.get(FIELD_PREFIX + name)
        kind = prop.get("type")
        if kind == "boolean":
            arguments[name] = raw == "on"
        elif raw is None or (raw == "" and name not in required):
            continue  # left empty: the tool's default
        else:
            arguments[name] = _typed(kind, raw)
    return arguments


def _typed(kind: object, raw: str) -> Any:
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        return raw  # the pipeline refuses it, naming the field
    return raw
