"""`python` sources: the user's tool modules, run by the runner in the caller's sandbox.

Prepare: `tools.sources.prepare_python_source` builds the package directory on the host
(it stays in `tools` beside `tools.sources.source_loader`, which the runner imports inside
the sandbox to load it: the two share the directory's layout), and `sandbox.source_layer`
the Docker image layer of its requirements. Discover: `python_sources` asks one sandbox for
every source's tool specs and registers them. Execute: the sandbox executor, as the gateway's
own tools (`tools.sources.placement`, `RunsIn.SANDBOX`).
"""

from gateway.sources.python.python_sources import (
    PythonSources,
    open_python_sources,
    register_sources,
)

__all__ = ["PythonSources", "open_python_sources", "register_sources"]
