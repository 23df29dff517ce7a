"""Where a gateway on this machine answers when nothing says otherwise: the address
`conclave serve` binds by default (the settings' default port). The CLI's HTTP commands call
it, and the bench's report links to its console; both read it here, so neither imports the
other."""

from __future__ import annotations

DEFAULT_GATEWAY = "http://127.0.0.1:8321"
