"""Children that die with the stack: Linux's parent-death signal, set between fork and exec.

A `conclave serve` killed with SIGKILL runs no clean-up of its own, so its gateway processes
and its Redis must notice by themselves: the kernel sends each SIGTERM when the thread that
started it ends. That is why it is only asked for from the main thread (`conclave serve`): a
stack started from a worker thread (a test's, a bench's) would lose its children when that
thread ended, long before the stack stopped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it


def die_with_this_process() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child get SIGTERM when we die; None off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # we died between the fork and the prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return set_parent_death_signal
