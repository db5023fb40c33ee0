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
from collections.abc import Iterator

BLAS: str = "blas"


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with BLAS limited to one thread (a no-op without threadpoolctl).

    The loaded libraries are looked up afresh on each call (about 0.7 ms): a controller kept
    from an earlier call misses a BLAS loaded since, such as torch's own.
    """
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 (optional: the fast extra)
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api=BLAS):
        yield
