"""Module names are unique in the product (STYLE.md 16, issue 41): two `client_requests.py`
or two `config.py` make a reader open the wrong file. A package's `__init__.py` and the
`__main__.py` of `python -m conclave` are the only names allowed twice."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("protocol", "tools", "sandbox", "gateway", "agents", "conclave")
SHARED = frozenset({"__init__.py", "__main__.py"})


def test_no_two_product_modules_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name not in SHARED:
                where[path.name].append(str(path.relative_to(ROOT)))
    assert len(where) > 100  # it found the product's modules
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"rename one of each: {twice}"
