"""Play one seeded game of Cold Iron with a uniformly random legal policy and render every step."""

from __future__ import annotations

import argparse
import random

import gymnasium as gym
import numpy as np

import coldiron_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="deal and policy seed")
    args = parser.parse_args(argv)
    env = gym.make(coldiron_env.ENV_ID, render_mode="ansi")
    rng = random.Random(args.seed)
    _, info = env.reset(seed=args.seed)
    print(env.render())
    terminated = False
    while not terminated:
        legal = np.flatnonzero(info["action_mask"]).tolist()
        _, reward, terminated, _, info = env.step(rng.choice(legal))
        print(env.render())
    print(f"outcome: {info['outcome']}  reward: {reward}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
