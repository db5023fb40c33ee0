"""Models saved by rl-zoo3, loaded without rl-zoo3: the registry's loader of their zips.

rl-zoo3 saves ``LOG/ALGO/ENV_N/ENV.zip`` and, in the folder ``ENV/`` beside it, the run's
``args.yml`` and ``config.yml`` (its algorithm, the env options) and any ``vecnormalize.pkl``.
:func:`agent_from_path` reads them, safely (only the ordered mappings rl-zoo3 writes are
built), and loads the zip with them. Apart from :mod:`agents.integrations.zoo`, which imports
rl-zoo3: the registry imports every loader to try a path, so this module imports nothing
heavy until a path is rl-zoo3's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from agents.learning.sb3_agent import SB3Agent

ARGS_FILE: Final = "args.yml"
CONFIG_FILE: Final = "config.yml"
NORMALIZER_FILE: Final = "vecnormalize.pkl"
ORDERED_DICT_TAG: Final = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"
ALGORITHMS: Final = {
    "ppo": "ppo", "a2c": "a2c", "dqn": "dqn", "qrdqn": "qrdqn", "ppo_lstm": "recurrent_ppo",
    "ppo_mask": "maskable_ppo",
}  # fmt: skip
"""rl-zoo3's algorithm names -> this project's registry names."""


def _read_run_files(folder: Path) -> tuple[str, dict[str, Any]] | None:
    """``(rl-zoo3 algorithm name, env_kwargs)`` from ``folder``'s args.yml and config.yml;
    None without them, :class:`~agents.learning.sb3_agent.ModelLoadError` on a bad file."""
    args_file, config_file = folder / ARGS_FILE, folder / CONFIG_FILE
    if not (args_file.is_file() and config_file.is_file()):
        return None
    import yaml  # noqa: PLC0415 (the train extra: only once a path is rl-zoo3's)

    from agents.learning.sb3_agent import ModelLoadError  # noqa: PLC0415 (as yaml)

    class Loader(yaml.SafeLoader):
        """SafeLoader that also reads the ordered mappings rl-zoo3 writes."""

    def ordered(loader: Loader, node: yaml.Node) -> dict[str, Any]:
        assert isinstance(node, yaml.SequenceNode)
        (pairs,) = loader.construct_sequence(node, deep=True)
        return {str(k): v for k, v in pairs}

    Loader.add_constructor(ORDERED_DICT_TAG, ordered)
    try:
        args = yaml.load(args_file.read_text(encoding="utf-8"), Loader=Loader)
        hyper = yaml.load(config_file.read_text(encoding="utf-8"), Loader=Loader)
        return str(args["algo"]), dict(args.get("env_kwargs") or hyper.get("env_kwargs") or {})
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
        raise ModelLoadError(
            f"{folder}: cannot read rl-zoo3's {ARGS_FILE}/{CONFIG_FILE}: {exc}"
        ) from None


def zoo_env_kwargs(run: Path) -> dict[str, Any] | None:
    """The env options of the rl-zoo3 run folder ``run`` (``LOG/ALGO/ENV_N``), None when it
    has none."""
    for config_file in sorted(run.glob(f"*/{CONFIG_FILE}")):
        files = _read_run_files(config_file.parent)
        if files is not None:
            return files[1]
    return None


def zoo_run_of(zip_path: Path) -> tuple[str, dict[str, Any]] | None:
    """``(algorithm, env_kwargs)`` of a model saved by rl-zoo3 (``ENV_N/ENV.zip``, its run
    files in ``ENV_N/ENV/``); None when the zip is not rl-zoo3's."""
    files = _read_run_files(zip_path.parent / zip_path.stem)
    if files is None:
        return None
    zoo_algo, env_kwargs = files
    if zoo_algo not in ALGORITHMS:
        from agents.learning.sb3_agent import ModelLoadError  # noqa: PLC0415

        raise ModelLoadError(
            f"{zip_path}: rl-zoo3 algorithm {zoo_algo!r} is not one of {sorted(ALGORITHMS)}"
        )
    return ALGORITHMS[zoo_algo], env_kwargs


def agent_from_path(path: Path) -> SB3Agent | None:
    """The model rl-zoo3 saved at ``path`` as an agent (its run's algorithm, env options and
    normalizer), None for any other path (``pyproject.toml``'s ``coldiron.loaders``)."""
    run = zoo_run_of(path) if path.suffix == ".zip" and path.is_file() else None
    if run is None:
        return None
    from agents.learning.sb3_agent import load_sb3_agent  # noqa: PLC0415 (the training stack)

    normalizer = path.parent / path.stem / NORMALIZER_FILE
    return load_sb3_agent(path, algorithm=run[0], env_kwargs=run[1], normalizer_file=normalizer)
