"""The runner's entry point: `python -B <the runner folder> --connect ... --module ...`.

Every backend starts the runner this way, the folder mounted read-only (at
`sandbox.backend.SANDBOX_RUNNER` where the backend isolates). Python runs this file with the
folder itself first on `sys.path`; its parent takes that place instead, so the folder is
imported as the package `runner` and its modules import each other relatively.
"""

import sys

# What the interpreter loaded before the runner's first line (`site` and the .pth files of
# its site-packages, such as setuptools' `_distutils_hack`): not the runner's start.
_PRELOADED = frozenset(sys.modules)

import os  # noqa: E402

if __package__:  # `python -m sandbox.runner` on the host
    from .runner_loop import main
else:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from runner.runner_loop import main  # type: ignore[import-not-found, no-redef]

sys.exit(main(preloaded=_PRELOADED))
