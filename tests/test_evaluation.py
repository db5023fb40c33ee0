"""Evaluation: paired deals, Wilson intervals, JSON report, plot, CLI errors."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from helpers import load_file

from agents.evaluation.arena import (
    AgentResult,
    agent_seeds,
    deal_decks,
    evaluate,
    evaluate_agent,
)
from agents.evaluation.lockstep import check_env_kwargs
from agents.evaluation.stats import wilson_interval
from agents.players.base import Agent
from agents.players.baselines import RandomAgent, ThreatenAgent
from agents.players.heuristic import HeuristicAgent

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "evaluate.py"
Z = 1.96
EXIT_ERROR = 2


def wilson_reference(k: int, n: int) -> tuple[float, float]:
    """The closed form (2np + z^2 +- z sqrt(z^2 + 4np(1-p))) / (2(n + z^2))."""
    p = k / n
    root = Z * math.sqrt(Z * Z + 4 * n * p * (1 - p))
    denom = 2 * (n + Z * Z)
    return (2 * n * p + Z * Z - root) / denom, (2 * n * p + Z * Z + root) / denom


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (5, 10), (35, 1000), (702, 20000)])
def test_wilson_matches_reference_formula(k: int, n: int) -> None:
    low, high = wilson_interval(k, n)
    want_low, want_high = wilson_reference(k, n)
    assert low == pytest.approx(want_low, abs=1e-12)
    assert high == pytest.approx(want_high, abs=1e-12)


def test_wilson_published_values() -> None:
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10), (0, 0), (True, 10)])
def test_wilson_rejects_bad_counts(k: Any, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n)


def test_deals_are_fixed_by_the_seed() -> None:
    a, b = deal_decks(5, 30), deal_decks(5, 30)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, deal_decks(6, 30))
    assert all(sorted(row) == list(range(54)) for row in a.tolist())
    assert agent_seeds(5, 30) == agent_seeds(5, 30)
    assert deal_decks(5, 10).tolist() == a[:10].tolist()  # a prefix: more deals extend the set


def test_every_agent_sees_the_same_deals() -> None:
    seen: dict[str, list[list[int]]] = {}

    def recorder(name: str) -> Any:
        def callback(index: int, deck: list[int], outcome: str, turn: int) -> None:
            assert index == len(seen.setdefault(name, []))
            seen[name].append(deck)

        return callback

    decks, seeds = deal_decks(9, 25), agent_seeds(9, 25)
    evaluate_agent(ThreatenAgent(), decks, seeds, callback=recorder("engine"))
    evaluate_agent(HeuristicAgent(), decks, seeds, use_engine=False, callback=recorder("env"))
    evaluate_agent(
        RandomAgent(), decks, seeds, {"observation_mode": "dict"}, callback=recorder("random")
    )
    assert seen["engine"] == decks.tolist()
    assert seen["env"] == decks.tolist()
    assert seen["random"] == decks.tolist()


def test_results_count_every_episode() -> None:
    results = evaluate(
        [(n, a) for n, a in (("random", RandomAgent()), ("threaten", ThreatenAgent()))], 50, 1
    )
    for r in results:
        assert r.episodes == 50
        assert sum(r.outcomes.values()) == 50
        assert 1 <= r.mean_turns <= 24
    assert results[0].outcomes["slain"] > 0  # random racks into Jokers
    assert results[1].outcomes["midnight"] > 0


def test_eval_env_kwargs_refuse_rewards_and_bad_values() -> None:
    with pytest.raises(ValueError, match="win_reward"):
        check_env_kwargs({"win_reward": 2.0})
    with pytest.raises(ValueError, match="observation_mode"):
        check_env_kwargs({"observation_mode": "pixels"})
    assert check_env_kwargs({"recall": True}) == {"recall": True}


def test_shorter_game_changes_the_play() -> None:
    decks, seeds = deal_decks(2, 20), agent_seeds(2, 20)
    short = evaluate_agent(ThreatenAgent(), decks, seeds, {"turns": 5})
    assert short.outcomes["midnight"] == 20
    assert short.mean_turns == 5


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_cli_json_and_plot(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "eval.json", tmp_path / "eval.png"
    proc = run_cli(
        "--agent", "random", "--agent", "threaten", "--agent", "heuristic",
        "--episodes", "40", "--seed", "3", "--json", str(out_json), "--plot", str(out_png),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "heuristic" in proc.stdout and "95% CI" in proc.stdout
    data = json.loads(out_json.read_text())
    assert data["episodes"] == 40 and data["seed"] == 3
    assert [a["agent"] for a in data["agents"]] == ["random", "threaten", "heuristic"]
    # what made it: the command as run, the commit and whether the tree had changes
    from agents.gitinfo import git_commit

    assert data["command"].startswith("scripts/evaluate.py --agent random --agent threaten")
    assert data["commit"] == git_commit() and isinstance(data["dirty"], bool)
    for entry in data["agents"]:
        assert {"agent", "episodes", "wins", "win_rate", "ci_low", "ci_high", "outcomes"} <= set(
            entry
        )
        assert set(entry["outcomes"]) == {"won", "slain", "deck_exhausted", "midnight", "illegal"}
        assert sum(entry["outcomes"].values()) == entry["episodes"] == 40
        assert entry["wins"] == entry["outcomes"]["won"]
        assert entry["ci_low"] <= entry["win_rate"] <= entry["ci_high"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind


def test_cli_pairs_every_agent_with_the_heuristic_deal_by_deal(tmp_path: Path) -> None:
    """The paired difference and McNemar counts come from the same deals' outcomes."""
    from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
    from agents.registry import make_agent

    out_json = tmp_path / "eval.json"
    proc = run_cli(
        "--agent", "threaten", "--agent", "heuristic", "--episodes", "60", "--seed", "5",
        "--json", str(out_json), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "paired with heuristic" in proc.stdout
    (pair,) = json.loads(out_json.read_text())["paired"]
    decks, seeds = deal_decks(5, 60), agent_seeds(5, 60)
    won = {
        name: evaluate_agent(make_agent(name), decks, seeds=seeds).won
        for name in ("threaten", "heuristic")
    }
    only_threaten = sum(t and not h for t, h in zip(won["threaten"], won["heuristic"], strict=True))
    only_heuristic = sum(
        h and not t for t, h in zip(won["threaten"], won["heuristic"], strict=True)
    )
    assert pair["agent"] == "threaten" and pair["against"] == "heuristic"
    assert (pair["only_other_wins"], pair["only_base_wins"]) == (only_threaten, only_heuristic)
    assert pair["difference"] == pytest.approx((only_threaten - only_heuristic) / 60)
    low, high = pair["difference_ci95"]
    assert low <= pair["difference"] <= high


def test_plot_function_writes_png(tmp_path: Path) -> None:
    from agents.evaluation.plots import plot_win_rates

    result = AgentResult("x")
    for outcome in ["won"] * 3 + ["midnight"] * 7:
        result.add(outcome, 24, 30)
    path = plot_win_rates([result], tmp_path / "sub" / "p.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("spec", "content"),
    [("missing/model.zip", None), ("garbage.zip", b"not a zip at all"), ("emptyrun", "dir")],
)
def test_cli_bad_model_is_a_clear_error(tmp_path: Path, spec: str, content: Any) -> None:
    if content == "dir":
        (tmp_path / spec).mkdir()
    elif content is not None:
        (tmp_path / spec).write_bytes(content)
    proc = run_cli("--agent", "threaten", "--agent", spec, "--episodes", "5", cwd=tmp_path)
    assert proc.returncode != 0
    assert Path(spec).name in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_unknown_agent_and_bad_kwarg(tmp_path: Path) -> None:
    proc = run_cli("--agent", "nobody", "--episodes", "5", cwd=tmp_path)
    assert proc.returncode != 0
    assert "random, threaten, heuristic" in proc.stderr
    proc = run_cli("--agent", "random", "--env-kwarg", "loss_reward=-1", cwd=tmp_path)
    assert proc.returncode != 0 and "loss_reward" in proc.stderr
    proc = run_cli("--agent", "random", "--episodes", "0", cwd=tmp_path)
    assert proc.returncode != 0 and "--episodes" in proc.stderr


def test_trained_models_play_on_one_torch_thread_unless_told() -> None:
    torch = pytest.importorskip("torch")

    cli = load_file(
        Path(__file__).resolve().parent.parent / "scripts" / "evaluate.py", "coldiron_evaluate_cli"
    )
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert cli.main(["--agent", "threaten", "--episodes", "3"]) == 0
        assert torch.get_num_threads() == 1
        assert cli.main(["--agent", "threaten", "--episodes", "3", "--torch-threads", "2"]) == 0
        assert torch.get_num_threads() == 2
        assert cli.main(["--agent", "threaten", "--episodes", "3", "--torch-threads", "0"]) == 2
    finally:
        torch.set_num_threads(previous)


def test_cli_refuses_a_bad_seed_before_loading_and_an_agent_given_twice(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model.zip")
    proc = run_cli("--agent", missing, "--seed", "-3", cwd=tmp_path)  # the seed is read first
    assert proc.returncode == 2 and "--seed -3" in proc.stderr and missing not in proc.stderr
    proc = run_cli("--agent", "heuristic", "--agent", "random", "--agent", "heuristic",
                   "--deals", "validation", "--seed", "3", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "--agent heuristic: given more than once" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_plot_title_names_the_deals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.evaluation import plots

    titles: list[str | None] = []
    monkeypatch.setattr(
        plots, "plot_win_rates", lambda results, path, title=None: titles.append(title) or path
    )
    cli = load_file(REPO / "scripts" / "evaluate.py", "coldiron_evaluate_cli_plot")
    args = ["--agent", "threaten", "--episodes", "3", "--deals", "validation", "--seed", "5"]
    assert cli.main([*args, "--plot", str(tmp_path / "p.png")]) == 0
    assert titles == ["Cold Iron win rate on 3 validation deals (seed 5), Wilson 95% interval"]


def test_models_of_one_name_are_labelled_by_the_end_of_their_paths() -> None:
    """rl-zoo3 names every model after the env: two of them must not share a table row's name."""
    cli = load_file(REPO / "scripts" / "evaluate.py", "coldiron_evaluate_cli_labels")
    specs = ["z/dqn/env_1/env.zip", "z/ppo/env_1/env.zip", "heuristic", "y/ppo/env_1/env.zip"]
    labels = cli.distinct(["env", "env", "heuristic", "env"], specs)
    assert labels == ["dqn/env_1/env", "z/ppo/env_1/env", "heuristic", "y/ppo/env_1/env"]
    assert cli.distinct(["a", "b"], ["x/a.zip", "x/b.zip"]) == ["a", "b"]  # unique: unchanged
    dotted = cli.distinct(["lr0.001", "lr0.001"], ["a/lr0.001", "b/lr0.001"])
    assert dotted == ["a/lr0.001", "b/lr0.001"]  # only .zip is taken off
    shared = cli.distinct(["m", "m", "a/m"], ["a/m.zip", "b/m.zip", "x"])
    assert len(set(shared)) == 3 and shared[1] == "b/m"  # a shortened label never repeats one


def test_an_observation_option_a_network_was_not_trained_on_is_refused_by_name() -> None:
    """``--env-kwarg counting=false`` with ``trained`` (a counting model) was dropped for the
    model while the record said counting was off; it is refused, naming both."""
    from agents.evaluation.arena import agent_env_kwargs

    class Network(HeuristicAgent):
        name = "net"
        env_kwargs: ClassVar[dict[str, bool]] = {"counting": True, "recall": False}

    assert agent_env_kwargs(Network(), {"turns": 20}) == {
        "turns": 20,
        "counting": True,
        "recall": False,
    }
    assert agent_env_kwargs(Network(), {"counting": np.bool_(True)})["counting"] is True
    with pytest.raises(ValueError, match=r"net plays on .* \(counting=True\), not counting=False"):
        agent_env_kwargs(Network(), {"counting": False})
    assert agent_env_kwargs(HeuristicAgent(), {"counting": False}) == {"counting": False}


def test_evaluation_refuses_decks_that_are_not_whole_and_engine_with_batches() -> None:
    """A deck of ids must hold each card once (a second Joker id, -1 or 54 named by its deal,
    on either path), and an agent plays on the engine or in batches, not both."""
    decks = deal_decks(0, 3)
    for wrong in (52, -1, 54):
        bad = decks.copy()
        bad[1, np.flatnonzero(bad[1] == 53)[0]] = wrong
        for engine in (True, False):
            with pytest.raises(ValueError, match="deal 1: the deck must hold each card id"):
                evaluate_agent(HeuristicAgent(), bad, [0, 1, 2], use_engine=engine)
    with pytest.raises(ValueError, match="rows of 54 card ids"):
        evaluate_agent(HeuristicAgent(), decks[0], [0])
    with pytest.raises(ValueError, match="'heuristic': play on the engine or in batches"):
        evaluate_agent(HeuristicAgent(), decks, [0, 1, 2], use_engine=True, use_batch=True)


def test_cli_checks_outputs_against_and_observation_clashes_before_any_play(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any agent plays, naming the flag: an output that would overwrite a
    model, one model given twice by two paths, an --against that is not an agent, a network
    whose observation clashes with --env-kwarg, too many deals, an empty file name; an
    --against given as the model's path pairs with its label."""
    from agents.evaluation.arena import MAX_EPISODES

    cli = load_file(SCRIPT, "coldiron_evaluate_cli_checks")
    model = tmp_path / "mine"
    shutil.copytree(Path(__file__).resolve().parent.parent / "agents" / "models" / "trained", model)
    meta = (model / "meta.json").read_bytes()
    base = ["--deals", "validation", "--seed", "3", "--episodes", "4"]
    refusals = (
        (["--agent", str(model), "--json", str(model / "meta.json")], "would overwrite --agent"),
        (["--agent", "heuristic", "--agent", str(model), "--plot", str(model / "model.zip")],
         "would overwrite"),
        (["--agent", str(model), "--agent", f"{model}/../mine"], "given more than once"),
        (["--agent", "heuristic", "--against", "heuristc"], "--against heuristc: not one of"),
        (["--agent", "heuristic", "--agent", "trained", "--env-kwarg", "counting=false"],
         "--agent trained: "),
        (["--agent", "heuristic", "--episodes", str(MAX_EPISODES + 1)], "--episodes must be in"),
        (["--agent", "heuristic", "--json", ""], "--json: an empty file name"),
        (["--agent", "trained", "--plot", str(REPO / "agents/models/trained/model.zip")],
         "would overwrite --agent trained's files"),
        (["--agent", "trained", "--agent", str(REPO / "agents/models/trained")],
         "given more than once"),
    )  # fmt: skip
    for extra, needle in refusals:
        assert cli.main([*base, *extra]) == EXIT_ERROR, extra
        err = capsys.readouterr().err
        assert needle in err and "  heuristic:" not in err, (extra, err)  # nothing played
    assert (model / "meta.json").read_bytes() == meta
    out = tmp_path / "paired.json"
    assert cli.main([*base, "--agent", "heuristic", "--agent", str(model), "--against",
                     str(model), "--json", str(out)]) == 0  # fmt: skip
    written = json.loads(out.read_text())
    pairs = written["paired"]
    assert [p["agent"] for p in pairs] == ["heuristic"] and pairs[0]["against"] != str(model)
    played = {a["agent"]: a["env_kwargs"] for a in written["agents"]}  # each agent's own options
    assert played["heuristic"] == {} and played[pairs[0]["against"]]["counting"] is True
    beside = model / "eval.json"  # a new file in a run's folder overwrites nothing
    assert cli.main([*base, "--agent", str(model), "--against", f"{model}/", "--json",
                     str(beside)]) == 0  # fmt: skip
    assert beside.is_file() and (model / "meta.json").read_bytes() == meta


def test_cli_warns_when_a_network_plays_rules_it_was_not_trained_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = load_file(SCRIPT, "coldiron_evaluate_cli_rules")
    out = tmp_path / "v.json"
    base = ["--deals", "validation", "--seed", "3", "--episodes", "2", "--json", str(out)]
    assert cli.main([*base, "--agent", "trained", "--env-kwarg", "bonus_always=true"]) == 0
    err = capsys.readouterr().err
    assert "trained was trained on the standard rules; it plays {'bonus_always': True}" in err
    assert json.loads(out.read_text())["deal_set"] == "validation"
    assert cli.main([*base, "--agent", "trained"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_paired_line_warns_where_its_interval_and_the_exact_test_disagree() -> None:
    """On few discordant deals the normal interval can exclude zero while McNemar's exact p
    is above 0.05, whichever player is ahead: the line says so, and says nothing where the
    two agree (a clear difference, or none)."""
    from agents.evaluation.arena import format_paired
    from agents.evaluation.stats import mcnemar

    def line(only_other: int, only_base: int, both: int) -> str:
        base = [True] * only_base + [False] * only_other + [True] * both
        other = [False] * only_base + [True] * only_other + [True] * both
        return format_paired([{**mcnemar(base, other), "agent": "b", "against": "a"}])

    for ahead, behind in ((5, 0), (0, 5)):  # 5 of 50 deals won by one player only
        text = line(ahead, behind, 45)
        assert "+10.00" in text or "-10.00" in text
        assert "p = 0.062" in text and "disagree" in text, text
    assert "disagree" not in line(40, 5, 955)  # p far below 0.05, the interval clear of 0
    assert "disagree" not in line(3, 3, 44)  # neither: no difference


def test_ctrl_c_keeps_the_deals_the_interrupted_agent_played(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during an agent's deals: ``evaluate_agent`` raises with the deals played until
    then (the first ones, in order: the full run's), and evaluate.py keeps them in its JSON
    beside the agents that finished, exiting 130."""
    from agents.evaluation import arena
    from agents.evaluation.arena import EvaluationInterrupted

    decks, seeds = deal_decks(7, 12), agent_seeds(7, 12)
    full = evaluate_agent(HeuristicAgent(), decks, seeds=seeds)

    def stop_after(count: int) -> Any:
        def callback(i: int, *_: object) -> None:
            if i + 1 == count:
                raise KeyboardInterrupt

        return callback

    with pytest.raises(EvaluationInterrupted) as stopped:
        evaluate_agent(HeuristicAgent(), decks, seeds=seeds, callback=stop_after(5))
    partial = stopped.value.partial
    assert partial.episodes == 5 and partial.won == full.won[:5]
    import pickle

    again = pickle.loads(pickle.dumps(stopped.value))  # as a worker process would send it
    assert isinstance(again, EvaluationInterrupted) and again.partial.won == partial.won

    real = arena.evaluate_agent

    def interrupted_second(agent: Agent, *args: Any, **kwargs: Any) -> AgentResult:
        if agent.name == "heuristic":
            kwargs["callback"] = stop_after(3)
        return real(agent, *args, **kwargs)

    monkeypatch.setattr(arena, "evaluate_agent", interrupted_second)
    cli = load_file(SCRIPT, "coldiron_evaluate_cli_interrupt")
    out = tmp_path / "eval.json"
    args = ["--deals", "validation", "--seed", "7", "--episodes", "12", "--json", str(out)]
    assert cli.main([*args, "--agent", "threaten", "--agent", "heuristic"]) == 130
    err = capsys.readouterr().err
    assert "heuristic had played the first 3 of 12 deals" in err
    doc = json.loads(out.read_text())
    assert [a["agent"] for a in doc["agents"]] == ["threaten"] and "interrupted" in doc
    kept = doc["interrupted_agent"]
    assert kept["agent"] == "heuristic" and kept["deals_played"] == kept["episodes"] == 3
    assert kept["env_kwargs"] == {}


def test_the_console_names_the_paired_counts_as_the_json_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader of both outputs finds the same names: only_other_wins, only_base_wins."""
    cli = load_file(REPO / "scripts" / "evaluate.py", "coldiron_evaluate_cli_names")
    out = tmp_path / "e.json"
    argv = ["--agent", "threaten", "--agent", "heuristic", "--episodes", "30", "--seed", "4"]
    assert cli.main([*argv, "--json", str(out)]) == 0
    (pair,) = json.loads(out.read_text())["paired"]
    printed = capsys.readouterr().out
    assert f"only_other_wins {pair['only_other_wins']}" in printed
    assert f"only_base_wins {pair['only_base_wins']}" in printed
