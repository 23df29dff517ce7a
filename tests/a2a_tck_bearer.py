"""A pytest plugin for the A2A TCK's run through Conclave (`-p a2a_tck_bearer`): the kit speaks
to an agent without credentials, and the gateway asks for a bearer token, so every HTTP client
the kit makes sends the token in `A2A_TCK_BEARER` (the card says so: `securitySchemes`)."""

from __future__ import annotations

import os
from typing import Any

import httpx

_TOKEN = os.environ["A2A_TCK_BEARER"]
_opened = httpx.Client.__init__


def _with_token(self: httpx.Client, *args: Any, **kwargs: Any) -> None:
    _opened(self, *args, **kwargs)
    self.headers.setdefault("Authorization", f"Bearer {_TOKEN}")


httpx.Client.__init__ = _with_token  # type: ignore[method-assign]
