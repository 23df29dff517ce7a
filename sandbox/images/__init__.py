"""What a sandbox's file system is built from on Docker: the runtime image (`runtime_image`,
`conclave sandbox build-image`) and the per-source layers of a source's dependencies
(`source_layer`), built from wheels prepared on the host."""

from sandbox.images.runtime_image import ImageBuildError, RuntimeImageBuilder
from sandbox.images.source_layer import node_layer, source_layer

__all__ = ["ImageBuildError", "RuntimeImageBuilder", "node_layer", "source_layer"]
