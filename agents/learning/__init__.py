"""Learning: run configs, Stable-Baselines3 training, imitation, tuning, several seeds."""
