"""One BLAS thread for the small matrix products of players that search.

A player's network rollouts multiply batches of a few thousand rows by layers of 64 to 256
units: products too small to gain from OpenBLAS's thread pool, which instead spins a thread
per core. Beside other work (the ladder's parallel workers, a second process) those threads
fight for the cores: in one ad hoc measurement on the project's 2-core machines (not a
committed record), a network rollout cost 156 CPU-us a game with OpenBLAS's default threads
against 34 with one thread. The limit is scoped (a context manager around the rollouts), so
a caller's own BLAS use keeps its setting.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

BLAS: str = "blas"

_CONTROLLER: dict[int, Any] = {}
"""len(sys.modules) when it was made -> the threadpoolctl controller of the libraries then
(one entry at most)."""


def blas_controller() -> Any:
    """A ``threadpoolctl.ThreadpoolController`` of the loaded libraries, or None without
    threadpoolctl.

    Finding the libraries costs about 0.8 ms (a scan of every shared object loaded), which
    was an eighth of ``strongest``'s time when done at every rollout batch; the controller
    is kept and found again only when a module has been imported since, the way a second
    BLAS (torch's own) arrives.
    """
    try:
        from threadpoolctl import ThreadpoolController  # noqa: PLC0415 (the fast extra)
    except ImportError:
        return None
    modules = len(sys.modules)
    controller = _CONTROLLER.get(modules)
    if controller is None:
        controller = ThreadpoolController()
        _CONTROLLER.clear()
        _CONTROLLER[modules] = controller
    return controller


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with BLAS limited to one thread (a no-op without threadpoolctl)."""
    controller = blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api=BLAS):
        yield
