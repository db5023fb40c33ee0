"""coldiron_env: the solo card game Cold Iron as a rules engine and a Gymnasium environment.

``import coldiron_env`` registers ``coldiron/ColdIron-v0``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gymnasium.envs.registration import register, registry

from coldiron_env.game import Game, GameOverError, IllegalActionError
from coldiron_env.options import RuleOptions

ENV_ID = "coldiron/ColdIron-v0"

try:
    __version__ = version("coldiron")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

if ENV_ID not in registry:
    register(
        id=ENV_ID,
        entry_point="coldiron_env.env:ColdIronEnv",
        vector_entry_point="coldiron_env.vector:ColdIronVectorEnv",
    )

__all__ = [
    "ENV_ID",
    "Game",
    "GameOverError",
    "IllegalActionError",
    "RuleOptions",
    "SeedError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """``SeedError`` from the env module, imported when first asked for (the package's
    import stays light: the engine, not the env)."""
    if name == "SeedError":
        from coldiron_env.env import SeedError  # noqa: PLC0415 (lazy: the env is heavier)

        return SeedError
    raise AttributeError(f"module 'coldiron_env' has no attribute {name!r}")
