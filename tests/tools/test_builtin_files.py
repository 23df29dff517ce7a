"""The built-in file tools touch the sandbox workspace only: a path that leaves it, by `..`,
an absolute path or a symbolic link, is refused before anything is read or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import builtin


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv(builtin.WORKSPACE_ENV, str(root))
    return root


def test_files_are_written_and_read_inside_the_workspace(workspace: Path) -> None:
    assert builtin.write_file("notes/today.txt", "héllo") == 5
    assert (workspace / "notes" / "today.txt").read_text() == "héllo"
    assert builtin.read_file("notes/../notes/today.txt") == "héllo"


@pytest.mark.parametrize("path", ["../outside.txt", "/tmp/outside.txt", "link/outside.txt"])
def test_a_path_leaving_the_workspace_is_refused(workspace: Path, path: str) -> None:
    (workspace / "link").symlink_to(workspace.parent)
    with pytest.raises(PermissionError, match="outside the workspace"):
        builtin.write_file(path, "x")
    with pytest.raises(PermissionError, match="outside the workspace"):
        builtin.read_file(path)
    assert not (workspace.parent / "outside.txt").exists()


def test_a_sibling_whose_name_extends_the_workspaces_is_outside(workspace: Path) -> None:
    sibling = workspace.parent / (workspace.name + "-other")
    sibling.mkdir()
    with pytest.raises(PermissionError):
        builtin.write_file(f"../{sibling.name}/x.txt", "x")
