"""The state ops replayed in Python, as `lua/state_ops.lua` applies them in the commit script.

The history checker replays each recorded op on the value the history before it produced and
compares the result with the one the commit recorded. Numbers are doubles in the script, so
they are compared as doubles here; `true` is not `1`, and objects are equal whatever their
key order, as in the script.
"""

from __future__ import annotations

from typing import Any

from protocol import StateOp

_EMPTY: dict[StateOp, Any] = {
    StateOp.INCREMENT: 0,
    StateOp.APPEND: [],
    StateOp.ADD_TO_SET: [],
    StateOp.MERGE: {},
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values as the commit script judges it."""
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = dict(into)
    for key, new in patch.items():
        old = merged.get(key)
        both_objects = isinstance(old, dict) and isinstance(new, dict)
        merged[key] = _merge(old, new) if both_objects else new  # type: ignore[arg-type]
    return merged


def replay_op(op: StateOp, stored: Any, operand: Any) -> Any:
    """The value `op` with `operand` makes of `stored` (None: no value); ValueError when the
    op does not fit the stored value."""
    value = _EMPTY[op] if stored is None else stored
    if op is StateOp.INCREMENT and _is_number(value) and _is_number(operand):
        return float(value) + float(operand)
    if op is StateOp.APPEND and isinstance(value, list):
        return [*value, operand]
    if op is StateOp.ADD_TO_SET and isinstance(value, list):
        return value if any(json_equal(x, operand) for x in value) else [*value, operand]
    if op is StateOp.MERGE and isinstance(value, dict) and isinstance(operand, dict):
        return _merge(value, operand)
    raise ValueError(f"{op} does not apply to {json_type(value)}")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
