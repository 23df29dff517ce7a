"""The gateway's settings from `conclave.toml`: the `[gateway]` table under the environment.

Precedence, highest first: the command line's options, `CONCLAVE_*` environment variables,
the file's `[gateway]` table, the defaults. The file's `[[source]]` entries reach the gateway
as `Settings.config` (the path), which the gateway reads at start-up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, ValidationError

from gateway import Settings
from tools.sources import ConfigError, load_config

DEFAULT_CONFIG = "conclave.toml"  # read from the working directory when no other is named


def settings_from(config: Path | None, **overrides: Any) -> Settings:
    """Settings with `config`'s [gateway] values under the environment and `overrides`; with
    no `config`, CONCLAVE_CONFIG names it, else `./conclave.toml` when there is one.
    ConfigError: one line per problem, naming the field.
    """
    config = config or Settings(**overrides).config
    if config is None and Path(DEFAULT_CONFIG).is_file():
        config = Path(DEFAULT_CONFIG)
    if config is None:
        return Settings(**overrides)
    path = config.resolve()
    table = load_config(path).gateway
    unknown = sorted(set(table) - Settings.setting_names() - {"config"})
    if unknown:
        raise ConfigError("\n".join(f"{path}: gateway.{k}: not a gateway setting" for k in unknown))
    from_file = {k: v for k, v in table.items() if not _set_in_environment(k)}
    try:
        return Settings(**{**from_file, **overrides, "config": path})
    except ValidationError as exc:
        lines = [
            f"{path}: gateway.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError("\n".join(lines)) from exc


def _set_in_environment(field: str) -> bool:
    """Whether an environment variable sets this setting (it then beats the file)."""
    declared = Settings.model_fields.get(field)  # None: a flat sandbox_* name
    alias = declared.validation_alias if declared is not None else None
    names = [str(a) for a in alias.choices] if isinstance(alias, AliasChoices) else []
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names.append(f"{prefix}{field}")
    present = {name.upper() for name in os.environ}
    return any(name.upper() in present for name in names)
