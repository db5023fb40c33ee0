"""Cold Iron in other RL code: RLlib on Ray, rl-zoo3's masked PPO, ONNX policies.

Each module needs its own optional extra (``pyproject.toml``) and is imported only
when used; the core package (``coldiron_env``) never imports them.
"""
