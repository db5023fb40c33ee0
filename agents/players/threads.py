"""One BLAS thread for the small matrix products of players that search.

Network rollouts multiply batches of a few thousand rows by layers of 64 to 256 units: too small to
gain from OpenBLAS's thread pool, whose spinning threads fight other work (the ladder's workers, a
second process) for the cores. In one ad hoc measurement on a 2-core machine, a network rollout cost
156 CPU-us a game with OpenBLAS's default threads against 34 with one. The limit is scoped (a
context manager), so a caller's own BLAS use keeps its setting.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any


@functools.lru_cache(maxsize=1)
def _controller(modules: int) -> Any:
    """A ``threadpoolctl.ThreadpoolController`` of the libraries loaded when ``modules``
    modules were. Finding them costs about 0.8 ms (an eighth of ``strongest``'s time at every
    rollout batch), so it is kept until a module has been imported since (the way a second
    BLAS, torch's, arrives)."""
    import threadpoolctl  # noqa: PLC0415 (the fast extra)

    return threadpoolctl.ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with BLAS limited to one thread (a no-op without threadpoolctl)."""
    try:
        import threadpoolctl  # noqa: F401, PLC0415 (the fast extra)
    except ImportError:
        yield
        return
    with _controller(len(sys.modules)).limit(limits=1, user_api="blas"):
        yield
