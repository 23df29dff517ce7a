"""`conclave.toml` as a user writes it: every mistake is one line naming the source and the
field, and the filters serve exactly the tools they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.sources import ConfigError, McpHttpSource, PythonSource, load_config


def _load(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "conclave.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value).splitlines()


def test_each_mistake_is_one_line_naming_the_source_and_the_field(tmp_path: Path) -> None:
    lines = _load(
        tmp_path,
        '[[source]]\nname = "time"\nkind = "mcp_stdio"\n\n'
        '[[source]]\nname = "web"\nkind = "mcp_http"\nurl = "not a url"\n'
        'network = ["example.com:99999", "example.com:443"]\n',
    )
    assert any("source 'time': command: Field required" in line for line in lines), lines
    assert any("source 'web': url:" in line for line in lines), lines
    assert any("source 'web': network" in line and "99999" in line for line in lines), lines
    assert all(line.startswith(f"{tmp_path / 'conclave.toml'}: ") for line in lines)


def test_names_unique_one_code_location_readable_toml(tmp_path: Path) -> None:
    twice = '[[source]]\nname = "a"\nkind = "python"\nmodule = "m"\n'
    assert _load(tmp_path, twice * 2) == [
        f"{tmp_path / 'conclave.toml'}: source names must be unique: a"
    ]
    both = '[[source]]\nname = "a"\nkind = "python"\nmodule = "m"\npath = "m.py"\n'
    assert "give exactly one of module, path" in _load(tmp_path, both)[0]
    assert "not TOML" in _load(tmp_path, "[[source]\n")[0]
    with pytest.raises(ConfigError, match="cannot read it"):
        load_config(tmp_path / "missing.toml")


def test_filters_and_prefixes(tmp_path: Path) -> None:
    path = tmp_path / "conclave.toml"
    path.write_text(
        '[[source]]\nname = "mine"\nkind = "python"\nmodule = "m"\n'
        'allow = ["get_*", "put_*"]\ndeny = ["put_secret"]\n\n'
        '[[source]]\nname = "up"\nkind = "mcp_http"\nurl = "http://127.0.0.1:9/mcp"\n'
        'network = ["api.example.com:443", "[::1]:8080"]\n'
    )
    mine, up = load_config(path).source
    assert isinstance(mine, PythonSource) and isinstance(up, McpHttpSource)
    served = [t for t in ("get_a", "put_b", "put_secret", "drop") if mine.serves(t)]
    assert served == ["get_a", "put_b"]
    assert mine.qualified("get_a") == "mine__get_a" and mine.aliases("get_a") == ("mine.get_a",)
    assert up.serves("anything") and up.network == ("api.example.com:443", "[::1]:8080")
    assert mine.network == "none"  # the default: no egress at all
