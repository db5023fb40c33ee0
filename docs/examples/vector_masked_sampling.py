"""The native vector env in your own loop: masked random play, on the env as it comes and
under one of Gymnasium's vector wrappers (tests/test_docs.py runs this file).

Mask dtypes: ``info["action_mask"]`` is ``int8``, shape ``(num_envs, 19)``, which is what
``MultiDiscrete.sample`` takes, one row per game, passed as a tuple;
``envs.unwrapped.action_masks()`` gives the same masks as ``bool`` (sb3-contrib's
convention; ``Discrete.sample`` refuses bool, so sample from the ``info`` mask).
"""

import gymnasium as gym
from gymnasium.wrappers.vector import NormalizeObservation

import coldiron_env  # noqa: F401 (registers coldiron/ColdIron-v0)

N = 8
envs = gym.make_vec("coldiron/ColdIron-v0", num_envs=N, vectorization_mode="vector_entry_point")
obs, info = envs.reset(seed=0)  # game i deals as reset(seed=0 + i) would (environment.md#seeding)
wins = games = 0
while games < 100:
    actions = envs.action_space.sample(mask=tuple(info["action_mask"]))  # int8 rows, a tuple
    obs, rewards, terminated, truncated, info = envs.step(actions)
    games += int(terminated.sum())
    wins += int((rewards == 1.0).sum())  # SAME_STEP (the default): a finished game is dealt
print(f"random play: {wins} wins in {games} games")  # again in the step that ended it

# Gymnasium's observation and reward wrappers need NEXT_STEP: the step after a game ends
# deals it again (and ignores that game's action), so a wrapper sees every terminal
# observation in order.
envs = NormalizeObservation(
    gym.make_vec(
        "coldiron/ColdIron-v0",
        num_envs=N,
        vectorization_mode="vector_entry_point",
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
)
obs, info = envs.reset(seed=0)
for _ in range(200):
    obs, rewards, terminated, truncated, info = envs.step(
        envs.action_space.sample(mask=tuple(info["action_mask"]))
    )
print("normalized observations:", obs.shape, obs.dtype)
