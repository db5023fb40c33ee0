import json

import gymnasium as gym
import onnxruntime as ort

import coldiron_env  # noqa: F401 (registers coldiron/ColdIron-v0)

policy = ort.InferenceSession("trained.onnx")  # from scripts/export.py --agent trained
env_kwargs = json.loads(policy.get_modelmeta().custom_metadata_map["env_kwargs"])
env = gym.make("coldiron/ColdIron-v0", **env_kwargs)  # the observation the policy was trained on
obs, info = env.reset(seed=42)
done = False
while not done:
    feed = {"observation": obs[None], "action_mask": info["action_mask"][None]}  # batch of one
    action = policy.run(["action"], feed)[0][0]  # the best legal action (int64)
    obs, reward, done, truncated, info = env.step(int(action))
print(info["outcome"], reward)
