"""The gateway's Lua files read on their own: each header lists every KEYS[i] and ARGV[i] the
script reads, and each shared function's header names its parameters and the function reads no
KEYS or ARGV of its own (the body that calls it decides which key it gets)."""

from __future__ import annotations

import re
from importlib import resources
from itertools import takewhile

import pytest

PACKAGES = ("gateway.state", "gateway.budgets")
FILES = sorted(
    (package, entry.name)
    for package in PACKAGES
    for entry in resources.files(package).joinpath("lua").iterdir()
    if entry.name.endswith(".lua")
)
# A shared function's file holds nothing but the function, so its code starts with it.
FUNCTION = re.compile(r"local function (\w+)\(([^)]*)\)")


def _text(package: str, name: str) -> str:
    return resources.files(package).joinpath("lua", name).read_text("utf-8")


def _header(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:])
    return lines


def _listed(header: list[str], label: str) -> int:
    """How many items the header's `KEYS:`/`ARGV:` list names, continuation lines included."""
    found: list[str] = []
    for i, line in enumerate(header):
        if f"{label}:" not in line:
            continue
        found.append(line.split(f"{label}:", 1)[1])
        # An indented line continues the list.
        found.extend(takewhile(lambda following: following.startswith("   "), header[i + 1 :]))
        break
    text = " ".join(found).split("ARGV:")[0]
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", "", text)
    return len([item for item in text.split(",") if item.strip(" .")])


def _highest(text: str, label: str) -> int:
    return max((int(i) for i in re.findall(rf"{label}\[(\d+)\]", text)), default=0)


def test_the_budgets_scripts_are_files() -> None:
    assert ("gateway.budgets", "outcome.lua") in FILES
    assert ("gateway.budgets", "record_sample.lua") in FILES


@pytest.mark.parametrize(("package", "name"), FILES)
def test_header_lists_every_key_and_argument(package: str, name: str) -> None:
    text = _text(package, name)
    header = _header(text)
    assert header, f"{package} lua/{name} starts without a header comment"
    code = text.splitlines()[len(header) :]
    function = FUNCTION.match(code[0]) if code else None
    if function is not None:
        assert not re.search(r"KEYS\[|ARGV\[", text), f"{name}: a shared function reads KEYS"
        described = " ".join(header)
        for parameter in (p.strip() for p in function.group(2).split(",")):
            assert re.search(rf"\b{parameter}\b", described), f"{name}: {parameter!r} unnamed"
        return
    for label in ("KEYS", "ARGV"):
        used = _highest(text, label)
        assert _listed(header, label) >= used, f"{package} lua/{name}: {label}[{used}] unlisted"
