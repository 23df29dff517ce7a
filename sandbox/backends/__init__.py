"""The sandbox backends: docker (containers), bwrap (namespaces + cgroups), process (none).

Only `ProcessBackend` is imported here; bwrap and docker are imported where they are chosen
(`sandbox.factory`), since they touch the host (cgroups, the Docker engine).
"""

from sandbox.backends.process import ProcessBackend

__all__ = ["ProcessBackend"]
