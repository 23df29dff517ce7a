"""Tool code cannot fill the disk (issue 26), on bwrap and docker.

Each sandbox's workspace has a quota (CONCLAVE_SANDBOX_WORKSPACE_MB, 256 MiB, and
CONCLAVE_SANDBOX_WORKSPACE_INODES files by default). Before: tool code wrote until the
disk was full (1.5 GB in three calls on docker, nothing refused), and on a disk shared with
Redis every tenant got 503. Now the call that fills its workspace gets SANDBOX_DISK_FULL,
the attacker's own clean-up call runs, and another tenant's calls never notice.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.security.conftest import SandboxedGateway

pytestmark = pytest.mark.anyio

# Past the default 256 MiB quota (and short of the 1 GiB file-size limit a call has anyway).
FILL_BYTES = textwrap.dedent(
    """
    chunk = b"x" * (1 << 20)
    with open("fill.bin", "wb") as out:
        for _ in range(320):
            out.write(chunk)
    "wrote 320 MiB"
    """
)
# Past the default 16,384 files.
FILL_FILES = textwrap.dedent(
    """
    import os
    os.makedirs("many", exist_ok=True)
    for n in range(20_000):
        open(f"many/{n}", "w").close()
    "made 20,000 files"
    """
)
CLEAN_UP = textwrap.dedent(
    """
    import os, shutil
    shutil.rmtree("many", ignore_errors=True)
    if os.path.exists("fill.bin"):
        os.remove("fill.bin")
    with open("after.txt", "w") as out:
        out.write("room again")
    open("after.txt").read()
    """
)


async def _call(
    gateway: SandboxedGateway, tool: str, tenant: str, arguments: dict[str, object]
) -> tuple[int, dict[str, object]]:
    answer = await gateway.client.post(
        f"/v1/tools/{tool}/call",
        json={"arguments": arguments},
        headers=gateway.bearer(tenant, "agent"),
    )
    body = answer.json()
    assert isinstance(body, dict)
    return answer.status_code, body


@pytest.mark.parametrize("fill", [FILL_BYTES, FILL_FILES], ids=["bytes", "files"])
async def test_a_full_workspace_fails_that_call_alone(
    sandboxed_gateway: SandboxedGateway, fill: str
) -> None:
    gateway = sandboxed_gateway
    status, victim = await _call(
        gateway, "run_python", "acme", {"code": "open('v','w').write('1')"}
    )
    assert status == 200, victim

    status, refused = await _call(gateway, "run_python", "evil", {"code": fill})
    assert (status, refused["code"]) == (507, "SANDBOX_DISK_FULL"), refused
    assert refused["category"] == "resource"
    assert refused["details"]["workspace_mb"] == 256  # type: ignore[index]
    assert "delete files" in str(refused["message"])

    # The attacker's own clean-up runs in the same workspace, and then it has room again.
    status, cleaned = await _call(gateway, "run_python", "evil", {"code": CLEAN_UP})
    assert status == 200, cleaned
    assert cleaned["result"]["return_value"] == "room again"  # type: ignore[index]

    # Another tenant writes and reads as before.
    code = "open('mine.txt','w').write('still mine'); open('mine.txt').read()"
    status, victim = await _call(gateway, "run_python", "acme", {"code": code})
    assert status == 200, victim
    assert victim["result"]["return_value"] == "still mine"  # type: ignore[index]
