"""One BLAS thread for the small matrix products of players that search.

Network rollouts multiply batches of a few thousand rows by layers of 64 to 256 units: too
small to gain from OpenBLAS's thread pool, whose spinning threads fight other work (the
ladder's workers, a second process) for the cores. In one ad hoc measurement on a 2-core
machine, a network rollout cost 156 CPU-us a game with OpenBLAS's default threads against 34
with one. The limit is scoped (a context manager), so a caller's own BLAS use keeps its setting.
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
    """A ``threadpoolctl.ThreadpoolController`` of the loaded libraries (None without
    threadpoolctl). Finding them costs about 0.8 ms (an eighth of ``strongest``'s time at
    every rollout batch), so it is kept, and found again only once a module has been imported
    since (the way a second BLAS, torch's, arrives)."""
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
