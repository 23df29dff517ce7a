"""`[[a2a_agent]]` as a user writes it: a remote agent has a url, a hosted one a tenant whose
agent of that name serves it, never both; the hosted fields are refused on a remote one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.sources import ConfigError, load_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conclave.toml"
    path.write_text(text)
    return path


def test_an_agent_without_a_url_is_hosted_for_its_tenant(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            '[[a2a_agent]]\nname = "remote"\nurl = "http://127.0.0.1:9"\n\n'
            '[[a2a_agent]]\nname = "mine"\ntenant = "acme"\ndescription = "Plans"\n'
            "idempotent = true\nlease_s = 5\n",
        )
    )
    remote, hosted = config.a2a_agent
    assert not remote.hosted and remote.tenant is None
    assert hosted.hosted and (hosted.tenant, hosted.description) == ("acme", "Plans")
    assert hosted.idempotent and hosted.lease_s == 5
    assert (
        load_config(_write(tmp_path, '[[a2a_agent]]\nname = "x"\ntenant = "t"\n'))
        .a2a_agent[0]
        .lease_s
        == 15.0
    )


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ("", "give a url (a remote agent) or a tenant"),
        ('url = "http://127.0.0.1:9"\ntenant = "t"', "not both"),
        ('url = "http://127.0.0.1:9"\nidempotent = true', "are for hosted agents"),
        ('url = "http://127.0.0.1:9"\nlease_s = 3', "are for hosted agents"),
        ('tenant = "t"\nlease_s = 0', "greater than 0"),
    ],
)
def test_a_wrong_declaration_names_the_fix(tmp_path: Path, fields: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, f'[[a2a_agent]]\nname = "x"\n{fields}\n'))
    assert says in str(refused.value)
