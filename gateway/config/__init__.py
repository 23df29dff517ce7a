"""The gateway's configuration: the one settings class (`CONCLAVE_*`) and the generated
secrets kept under the data directory."""

from gateway.config.app_settings import app_settings, keep_settings
from gateway.config.secrets_store import ADMIN_KEY_FILE, default_data_dir
from gateway.config.settings import Settings

__all__ = [
    "ADMIN_KEY_FILE",
    "Settings",
    "app_settings",
    "default_data_dir",
    "keep_settings",
]
