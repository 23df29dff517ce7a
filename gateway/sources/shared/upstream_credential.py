"""The credential the gateway holds for an upstream it speaks to (an `mcp_http` source, an A2A
agent): read from the environment variable or the secret file the configuration names, sent
as "Bearer <credential>" in the configured header. A caller's token is never passed on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class UpstreamConfigError(ValueError):
    """The source's configuration cannot work (its credential is missing): never retryable."""


class HoldsCredential(Protocol):
    @property
    def credential_env(self) -> str | None: ...
    @property
    def credential_file(self) -> Path | None: ...
    @property
    def credential_header(self) -> str: ...


def credential_headers(source: HoldsCredential) -> dict[str, str]:
    """The header carrying the gateway's credential for `source`, or none if it needs none."""
    if source.credential_env is not None:
        value = os.environ.get(source.credential_env)
        if not value:
            raise UpstreamConfigError(
                f"environment variable {source.credential_env} (credential_env) is not set"
            )
    elif source.credential_file is not None:
        try:
            value = source.credential_file.read_text("utf-8").strip()
        except OSError as exc:
            raise UpstreamConfigError(
                f"cannot read credential_file {source.credential_file}: {exc.strerror}"
            ) from exc
    else:
        return {}
    if any(c in value for c in "\r\n\0"):  # it would end the header and forge others
        raise UpstreamConfigError("the credential holds a line break or NUL; it cannot be sent")
    return {source.credential_header: f"Bearer {value}"}
