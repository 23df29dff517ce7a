"""The configuration an app was created with: stored on it once, read through `app_settings`.

Known before the app's lifespan runs (unlike the parts of `gateway.http.gateway_parts`, which
the lifespan builds): the Host check reads it from the first request on, and so do the identity
dependencies (`gateway.identity`), which may serve on an app of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from gateway.config.settings import Settings

if TYPE_CHECKING:  # a type only: the CLI imports this package without the web framework
    from starlette.applications import Starlette

_KEY = "settings"  # the attribute of `app.state` the settings live in


def app_settings(app: Starlette) -> Settings:
    """The settings `app` was created with (in a handler: `app_settings(request.app)`)."""
    settings = getattr(app.state, _KEY, None)
    if settings is None:  # a wiring bug: an app nobody configured
        raise RuntimeError("this app has no settings: build it with gateway.create_app")
    return cast(Settings, settings)


def keep_settings(app: Starlette, settings: Settings) -> None:
    """Store `settings` on `app` (the assembly does, once)."""
    setattr(app.state, _KEY, settings)


__all__ = ["app_settings", "keep_settings"]
