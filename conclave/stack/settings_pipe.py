"""How the embedded stack hands the gateway process its settings: JSON through a pipe.

Never through the environment: an environment is readable from /proc/<pid>/environ for as
long as the process lives, and the settings hold the secrets. The pipe is written before the
gateway starts, read once by it, and closed.
"""

from __future__ import annotations

import json
import os

from pydantic import SecretStr

from gateway import Settings


def settings_pipe(settings: Settings) -> int:
    """A pipe's read end holding `settings` (secrets in clear); the caller passes it on."""
    fields = settings.model_dump(mode="json")
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            fields[name] = value.get_secret_value()
    read_end, write_end = os.pipe()
    # A few KiB, well under a pipe's buffer: written in full before anyone reads.
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(json.dumps(fields).encode())
    return read_end


def read_settings(fd: int) -> Settings:
    """The settings from a pipe made by `settings_pipe`; closes it."""
    with os.fdopen(fd, "rb") as pipe:
        return Settings.model_validate_json(pipe.read())
