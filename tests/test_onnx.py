"""ONNX export of trained policies (agents/integrations/onnx_policy.py, scripts/export.py).

The exported file must play exactly as the Stable-Baselines3 agent it came from, under
onnxruntime alone (no torch, no SB3), with the layout the docs promise: inputs
``observation`` (float32 [batch, n]) and ``action_mask`` (int8 [batch, 19]), output
``action`` (int64 [batch]), ``env_kwargs`` in ``metadata_props``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from agents.evaluation.arena import agent_seeds, evaluate_agent, validation_decks  # noqa: E402
from agents.integrations.onnx_export import (  # noqa: E402
    OnnxExportError,
    export_onnx,
    near_tie_rows,
)
from agents.integrations.onnx_policy import (  # noqa: E402
    ACTION_OUTPUT,
    ENV_KWARGS_KEY,
    MASK_INPUT,
    OBSERVATION_INPUT,
    OnnxAgent,
    OnnxLoadError,
    load_onnx_agent,
)
from agents.players.base import Agent  # noqa: E402
from coldiron_env.actions import NUM_ACTIONS  # noqa: E402
from coldiron_env.cards import deck_codes  # noqa: E402
from coldiron_env.env import ColdIronEnv  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "onnx_play.py"
EXAMPLE_MODEL = "trained.onnx"
EXAMPLE_SEED = 42
AGREEMENT_DEALS = 400
"""Validation deals each agreement test plays (hundreds, a second or two in lockstep)."""
AGREEMENT_SEED = 7
SEQUENCE_DEALS = 100
"""Deals whose every decision is compared (one env at a time: slower with ``counting``)."""
SUBPROCESS_DEALS = 60
BENCHMARK_DEALS = 6
BIG_BATCH = 64
TINY_STEPS = 400
TINY_ENV_KWARGS: dict[str, dict[str, Any]] = {
    "dqn": {"recall": True},  # another family (Q-values) and another observation (102)
    "a2c": {},  # an actor-critic without masks, the plain observation (48)
}
BLOCK_TRAINING_STACK = (
    "import sys\n"
    "for name in ('torch', 'stable_baselines3', 'sb3_contrib'):\n"
    "    sys.modules[name] = None  # any import of them now raises ImportError\n"
)


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def sb3_trained() -> Any:
    pytest.importorskip("torch")
    from agents.registry import make_agent, set_torch_threads

    set_torch_threads()
    return make_agent("trained")


@pytest.fixture(scope="module")
def trained_onnx(tmp_path_factory: pytest.TempPathFactory, sb3_trained: Any) -> Path:
    out = tmp_path_factory.mktemp("onnx") / "trained.onnx"
    export_onnx("trained", out)
    return out


def _tiny_model(algorithm: str, folder: Path) -> Path:
    """A model of ``algorithm`` trained for a few hundred steps, saved as a tagged zip."""
    import torch

    from agents.learning.algorithms import get_algorithm
    from agents.learning.sb3_agent import tag_model

    torch.manual_seed(3)
    env_kwargs = TINY_ENV_KWARGS[algorithm]
    cls = get_algorithm(algorithm).load_class()
    extra: dict[str, Any] = (
        {"learning_starts": 64, "buffer_size": 1_000, "exploration_fraction": 0.5}
        if algorithm == "dqn"
        else {"n_steps": 32}
    )
    model = cls(
        "MlpPolicy", ColdIronEnv(**env_kwargs), seed=3, device="cpu",
        policy_kwargs={"net_arch": [32, 32]}, **extra,
    )  # fmt: skip
    model.learn(total_timesteps=TINY_STEPS)
    with torch.no_grad():  # sharpen the scores so the games differ from deal to deal
        for p in model.policy.parameters():
            p.mul_(4.0)
    tag_model(model, algorithm, env_kwargs)
    path = folder / f"{algorithm}.zip"
    model.save(path)
    return path


@pytest.fixture(scope="module", params=sorted(TINY_ENV_KWARGS))
def tiny_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``(SB3 agent, ONNX agent)`` of a freshly trained tiny model of another algorithm."""
    pytest.importorskip("torch")
    from agents.learning.sb3_agent import load_sb3_agent

    folder = tmp_path_factory.mktemp(f"tiny-{request.param}")
    zip_path = _tiny_model(request.param, folder)
    out = folder / f"{request.param}.onnx"
    export_onnx(str(zip_path), out)
    return load_sb3_agent(zip_path), load_onnx_agent(out)


# ------------------------------------------------------------------ helpers
def per_deal_games(
    agent: Agent, episodes: int, **how: Any
) -> list[tuple[str, int, tuple[int, ...]]]:
    """(outcome, last turn, cards in the order used) of each validation deal, in the arena."""
    rows: list[tuple[str, int, tuple[int, ...]]] = []

    def record(_i: int, deck: list[int], outcome: str, turn: int) -> None:
        rows.append((outcome, turn, tuple(deck)))

    decks = validation_decks(AGREEMENT_SEED, episodes)
    evaluate_agent(agent, decks, agent_seeds(AGREEMENT_SEED, episodes), callback=record, **how)
    return rows


def decisions(agent: Agent, episodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (observation, mask, action) of ``agent`` playing the validation deals, one env
    at a time (the action sequences)."""
    env = ColdIronEnv(**agent.env_kwargs)  # type: ignore[attr-defined]
    observations, masks, actions = [], [], []
    for row in validation_decks(AGREEMENT_SEED, episodes).tolist():
        obs, info = env.reset(options={"deck": deck_codes(row)})
        done = False
        while not done:
            action = agent.act(obs, info["action_mask"], info)
            observations.append(obs)
            masks.append(info["action_mask"])
            actions.append(action)
            obs, _, done, _, info = env.step(action)
    return np.stack(observations), np.stack(masks), np.asarray(actions)


def assert_same_play(sb3: Any, onnx_agent: OnnxAgent) -> None:
    """The ONNX agent plays every deal as the SB3 agent: same outcome, turn and cards (in
    lockstep batches, and one env at a time on the first deals), and the same action at
    every decision of the SB3 agent's first games (near-ties of its scores excepted, and
    there must be almost none)."""
    assert onnx_agent.env_kwargs == sb3.env_kwargs
    reference = per_deal_games(sb3, AGREEMENT_DEALS)
    assert len({turn for _, turn, _ in reference}) > 1, "the games must differ to test anything"
    assert per_deal_games(onnx_agent, AGREEMENT_DEALS) == reference  # lockstep batches
    assert per_deal_games(onnx_agent, SEQUENCE_DEALS, use_batch=False) == reference[:SEQUENCE_DEALS]
    obs, masks, actions = decisions(sb3, SEQUENCE_DEALS)
    assert len(set(actions.tolist())) > 2, "the policy must choose between actions"
    onnx_actions = onnx_agent.policy.act(obs, masks)
    ties = near_tie_rows(np.asarray(sb3.policy.scores(obs)), masks.astype(bool))
    differ = onnx_actions != actions
    assert not (differ & ~ties).any(), f"{int((differ & ~ties).sum())} decisions differ"
    assert ties.mean() < 0.01, f"{int(ties.sum())} near-ties: the comparison says little"


def run_without_torch(code: str, cwd: Path) -> str:
    """Run ``code`` in a fresh interpreter in which torch and SB3 cannot be imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TRAINING_STACK + code],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


# ------------------------------------------------------------------ the file's layout
def test_inputs_outputs_and_metadata(trained_onnx: Path, sb3_trained: Any) -> None:
    model = onnx.load(str(trained_onnx))
    onnx.checker.check_model(model)
    size = sb3_trained.model.observation_space.shape[0]

    def layout(values: Any) -> dict[str, tuple[int, list[Any]]]:
        return {
            v.name: (
                v.type.tensor_type.elem_type,
                [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim],
            )
            for v in values
        }

    inputs, outputs = layout(model.graph.input), layout(model.graph.output)
    assert set(inputs) == {OBSERVATION_INPUT, MASK_INPUT} and set(outputs) == {ACTION_OUTPUT}
    batch = inputs[OBSERVATION_INPUT][1][0]
    assert isinstance(batch, str), "the batch dimension must be symbolic"
    assert inputs[OBSERVATION_INPUT] == (onnx.TensorProto.FLOAT, [batch, size])
    assert inputs[MASK_INPUT] == (onnx.TensorProto.INT8, [batch, NUM_ACTIONS])
    assert outputs[ACTION_OUTPUT] == (onnx.TensorProto.INT64, [batch])
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props[ENV_KWARGS_KEY]) == sb3_trained.env_kwargs
    assert ColdIronEnv(**json.loads(props[ENV_KWARGS_KEY])).observation_space.shape == (size,)


def test_batch_dimension_is_dynamic(trained_onnx: Path, sb3_trained: Any) -> None:
    obs, masks, _ = decisions(sb3_trained, 3)
    session = ort.InferenceSession(str(trained_onnx), providers=["CPUExecutionProvider"])
    for n in (1, BIG_BATCH):
        feed = {OBSERVATION_INPUT: obs[:n], MASK_INPUT: masks[:n]}
        (actions,) = session.run([ACTION_OUTPUT], feed)
        assert actions.dtype == np.int64 and actions.shape == (n,)
        assert actions.tolist() == sb3_trained.policy.act(obs[:n], masks[:n]).tolist()


def test_the_mask_is_honoured(trained_onnx: Path, sb3_trained: Any) -> None:
    obs, _, _ = decisions(sb3_trained, 1)
    row = np.repeat(obs[:1], NUM_ACTIONS, axis=0)
    only = np.eye(NUM_ACTIONS, dtype=np.int8)  # row a: only action a legal
    policy = load_onnx_agent(trained_onnx).policy
    assert policy.act(row, only).tolist() == list(range(NUM_ACTIONS))
    free = policy.act(row[:1], np.ones((1, NUM_ACTIONS), dtype=np.int8))[0]
    blocked = np.ones((1, NUM_ACTIONS), dtype=np.int8)
    blocked[0, free] = 0
    assert policy.act(row[:1], blocked)[0] != free  # the favourite, once illegal, is not chosen
    with pytest.raises(ValueError, match="no legal action"):
        policy.act(row[:1], np.zeros((1, NUM_ACTIONS), dtype=np.int8))


# ------------------------------------------------------------------ same play
@pytest.mark.slow
def test_trained_plays_the_same_games_as_sb3(trained_onnx: Path, sb3_trained: Any) -> None:
    from agents.registry import make_agent

    agent = make_agent(str(trained_onnx))
    assert isinstance(agent, OnnxAgent) and agent.name == trained_onnx.name
    assert_same_play(sb3_trained, agent)


@pytest.mark.slow
def test_a_tiny_model_of_another_algorithm_plays_the_same_games(tiny_pair: Any) -> None:
    sb3, onnx_agent = tiny_pair
    assert onnx_agent.policy.algorithm == sb3.policy.spec.name
    assert_same_play(sb3, onnx_agent)


@pytest.mark.slow
def test_a_vecnormalize_beside_the_model_is_folded_into_the_graph(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from agents.learning.sb3_agent import VECNORMALIZE_FILE, load_sb3_agent

    zip_path = _tiny_model("a2c", tmp_path)
    env_kwargs = TINY_ENV_KWARGS["a2c"]
    normalizer = VecNormalize(DummyVecEnv([lambda: ColdIronEnv(**env_kwargs)]), norm_reward=False)
    rng = np.random.default_rng(0)
    size = normalizer.observation_space.shape[0]  # type: ignore[index]
    normalizer.obs_rms.mean = rng.random(size)  # type: ignore[union-attr]
    normalizer.obs_rms.var = rng.random(size) * 0.3 + 0.01  # type: ignore[union-attr]
    normalizer.save(str(tmp_path / VECNORMALIZE_FILE))
    sb3 = load_sb3_agent(zip_path)
    assert sb3.policy.obs_normalizer is not None
    export_onnx(str(zip_path), tmp_path / "a2c.onnx")
    assert_same_play(sb3, load_onnx_agent(tmp_path / "a2c.onnx"))


# ------------------------------------------------------------------ without torch
@pytest.mark.slow
def test_the_onnx_agent_runs_without_torch_or_sb3(trained_onnx: Path, sb3_trained: Any) -> None:
    code = (
        "import json\n"
        "from agents.registry import make_agent\n"
        "from agents.evaluation.arena import agent_seeds, evaluate_agent, validation_decks\n"
        f"agent = make_agent({str(trained_onnx)!r})\n"
        "rows = []\n"
        f"decks = validation_decks({AGREEMENT_SEED}, {SUBPROCESS_DEALS})\n"
        "evaluate_agent(agent, decks, agent_seeds(0, len(decks)),\n"
        "               callback=lambda i, deck, outcome, turn: rows.append([outcome, turn]))\n"
        "assert sys.modules['torch'] is None\n"
        "assert not [m for m in sys.modules if m.startswith(('stable_baselines3.', 'torch.'))]\n"
        "print(json.dumps(rows))\n"
    )
    rows = json.loads(run_without_torch(code, REPO))
    expected = [[o, t] for o, t, _ in per_deal_games(sb3_trained, SUBPROCESS_DEALS)]
    assert rows == expected


@pytest.mark.slow
def test_the_readme_example_runs_without_torch(
    trained_onnx: Path, sb3_trained: Any, tmp_path: Path
) -> None:
    shutil.copy(trained_onnx, tmp_path / EXAMPLE_MODEL)
    code = f"import runpy\nrunpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
    outcome, reward = run_without_torch(code, tmp_path).split()
    env = ColdIronEnv(**sb3_trained.env_kwargs)
    obs, info = env.reset(seed=EXAMPLE_SEED)
    done = False
    while not done:
        obs, last_reward, done, _, info = env.step(sb3_trained.act(obs, info["action_mask"]))
    assert (outcome, float(reward)) == (info["outcome"], last_reward)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("heuristic", "built-in player, not a network"),
        ("random", "built-in player, not a network"),
        ("planner-trained", "only the network itself"),
        ("no-such-agent", "unknown agent"),
        ("runs/none/model.zip", "does not exist"),
    ],
)
def test_export_refuses_what_is_not_a_network(spec: str, message: str, tmp_path: Path) -> None:
    out = tmp_path / "x.onnx"
    with pytest.raises(ValueError, match=message):
        export_onnx(spec, out)
    assert not out.exists()


def test_export_refuses_a_recurrent_policy(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from sb3_contrib import RecurrentPPO

    from agents.learning.sb3_agent import tag_model

    model = RecurrentPPO(
        "MlpLstmPolicy", ColdIronEnv(), n_steps=16, batch_size=16, device="cpu",
        policy_kwargs={"lstm_hidden_size": 8, "net_arch": [8]},
    )  # fmt: skip
    tag_model(model, "recurrent_ppo", {})
    model.save(tmp_path / "lstm.zip")
    with pytest.raises(OnnxExportError, match="RecurrentPPO"):
        export_onnx(str(tmp_path / "lstm.zip"), tmp_path / "lstm.onnx")
    assert not (tmp_path / "lstm.onnx").exists()


def test_export_refuses_a_bad_out(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder.onnx").mkdir()
    for out, message in [
        (tmp_path / "x.pt", r"must end in \.onnx"),
        (tmp_path / "folder.onnx", "is a directory"),
        (tmp_path / "file" / "x.onnx", "is a file, not a folder"),
    ]:
        with pytest.raises(OnnxExportError, match=message):
            export_onnx("trained", out)


def test_the_script_reports_errors_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import export
    finally:
        sys.path.remove(str(REPO / "scripts"))
    out = tmp_path / "h.onnx"
    assert export.main(["--agent", "heuristic", "--out", str(out)]) == export.EXIT_ERROR
    assert "built-in player" in capsys.readouterr().err and not out.exists()
    bench = ["--benchmark", str(tmp_path / "b.json"), "--benchmark-seed", "70000"]
    assert export.main(["--agent", "trained", "--out", str(out), *bench]) == export.EXIT_ERROR
    assert "--benchmark-seed 70000" in capsys.readouterr().err and not out.exists()
    assert export.main(["--agent", "trained", "--out", str(tmp_path / "t.zip")]) == 2
    assert "must end in .onnx" in capsys.readouterr().err


def test_loading_a_bad_file_names_it(trained_onnx: Path, tmp_path: Path) -> None:
    from agents.registry import make_agent

    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not onnx at all")
    with pytest.raises(OnnxLoadError, match=r"garbage\.onnx"):
        make_agent(str(garbage))
    with pytest.raises(ValueError, match="does not exist"):
        make_agent(str(tmp_path / "missing.onnx"))
    model = onnx.load(str(trained_onnx))
    del model.metadata_props[:]
    bare = tmp_path / "bare.onnx"
    onnx.save(model, str(bare))
    with pytest.raises(OnnxLoadError, match=r"bare\.onnx.*not a Cold Iron policy"):
        load_onnx_agent(bare)
    model = onnx.load(str(trained_onnx))
    for prop in model.metadata_props:
        if prop.key == ENV_KWARGS_KEY:
            prop.value = json.dumps({"counting": False})  # 48 values, the graph takes 201
    wrong = tmp_path / "wrong.onnx"
    onnx.save(model, str(wrong))
    with pytest.raises(OnnxLoadError, match=r"wrong\.onnx.*observations of size"):
        load_onnx_agent(wrong)


def test_the_benchmark_record_says_the_two_agree(trained_onnx: Path, sb3_trained: Any) -> None:
    from agents.integrations.onnx_export import benchmark

    record = benchmark("trained", trained_onnx, BENCHMARK_DEALS, 0)
    agreement = record["agreement"]
    assert agreement["decisions_compared"] > BENCHMARK_DEALS  # several decisions a game
    assert agreement["decisions_with_the_same_action"] == agreement["decisions_compared"]
    same = agreement["deals_with_the_same_outcome_and_last_turn_as_sb3_one_at_a_time"]
    assert same == {"onnx_one_at_a_time": BENCHMARK_DEALS, "onnx_lockstep": BENCHMARK_DEALS}
    for label in ("sb3", "onnx"):
        assert all(v > 0 for v in record["inference_only"][label].values())
        assert record["games"][label]["lockstep"]["decisions"] == agreement["decisions_compared"]
    json.dumps(record)  # the record is JSON as it stands
