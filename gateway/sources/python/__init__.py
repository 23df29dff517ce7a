"""`python` sources: the user's tool modules, run by the runner in the caller's sandbox.

Prepare: `prepare` builds the package directory on the host (its layout is defined by
`tools.sources.source_loader`, which the runner imports inside the sandbox to load it), and
`sandbox.images.source_layer` the Docker image layer of its requirements. Discover:
`python_sources` asks one sandbox for every source's tool specs and registers them. Execute:
the sandbox executor, as the gateway's own tools (`tools.calls.Placement`,
`RunsIn.SANDBOX`).
"""

from gateway.sources.python.python_sources import (
    PythonSources,
    open_python_sources,
    register_sources,
)

__all__ = ["PythonSources", "open_python_sources", "register_sources"]
