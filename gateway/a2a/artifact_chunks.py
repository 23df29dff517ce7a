"""Artifacts a hosted agent's worker streams in chunks (A2A 1.0's TaskArtifactUpdateEvent
`append` and `lastChunk`), as the task's artifact list in Redis holds them.

An entry of the list is an artifact's JSON, as the worker wrote it; a chunk (`append`, or one
that says whether it is the last) is kept as `{"artifact": ..., "append": ..., "lastChunk":
...}`, so the write script never re-encodes a worker's JSON (Lua's cjson would turn an
empty list into an object). What the task holds is merged from them in Python:

- an entry that does not append is the artifact of its id, whole: it replaces one held of
  that id (a worker running a task again after another died starts each artifact afresh;
  the script drops the old run's chunks of it), in the place the first one had;
- an appending chunk adds its parts to the artifact of its id (metadata and extensions
  merged over), or starts it when none is held.

Subscribers get each write as it came: the chunk, with `append` and `lastChunk` as the
worker set them.
"""

from __future__ import annotations

import json
from typing import Any


def chunk_entry(artifact: dict[str, Any], append: bool, last_chunk: bool | None) -> str:
    """The list entry for a write of `artifact`."""
    if not append and last_chunk is None:
        return json.dumps(artifact)
    entry: dict[str, Any] = {"artifact": artifact, "append": append}
    if last_chunk is not None:
        entry["lastChunk"] = last_chunk
    return json.dumps(entry)


def _read(entry: str) -> tuple[dict[str, Any], bool, bool | None]:
    found = json.loads(entry)
    if "artifactId" not in found and isinstance(found.get("artifact"), dict):
        return found["artifact"], bool(found.get("append")), found.get("lastChunk")
    return found, False, None


def artifact_update(entry: str) -> dict[str, Any]:
    """The A2A artifactUpdate fields of one write (without taskId and contextId)."""
    artifact, append, last_chunk = _read(entry)
    update: dict[str, Any] = {"artifact": artifact}
    if append:
        update["append"] = True
    if last_chunk is not None:
        update["lastChunk"] = last_chunk
    return update


def merged_artifacts(entries: list[str]) -> list[dict[str, Any]]:
    """The task's artifacts, whole, in the order each was first written."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in entries:
        artifact, append, _last = _read(entry)
        key = str(artifact.get("artifactId", ""))
        held = merged.get(key)
        if not append or held is None:
            merged[key] = dict(artifact)
            continue
        held["parts"] = [*held.get("parts", []), *artifact.get("parts", [])]
        for field in ("metadata", "extensions"):
            if field in artifact:
                held[field] = _merged(held.get(field), artifact[field])
        for field in ("name", "description"):
            if field in artifact and field not in held:
                held[field] = artifact[field]
    return list(merged.values())


def _merged(held: Any, more: Any) -> Any:
    if isinstance(held, dict) and isinstance(more, dict):
        return {**held, **more}
    if isinstance(held, list) and isinstance(more, list):
        return [*held, *(m for m in more if m not in held)]
    return more
