"""A call's arguments as canonical JSON, and their digest: what an approval is bound to.

Canonical: keys sorted, no whitespace, UTF-8 as is, no NaN or infinity; so two calls whose
arguments are the same JSON value have the same digest, and any change (a value, a key, a
nesting) a different one. Numbers are written as Python writes them: `1` and `1.0` differ,
which only ever asks for one approval more, never one less.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON, hex."""
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


__all__ = ["arguments_digest", "canonical_json"]
