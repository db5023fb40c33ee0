"""The terminal play loop, driven through standard input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coldiron_env.cards import CARD_CODES, DECK_SIZE, NUM_SUITS, numbered_id
from coldiron_env.options import VARIANT_KEYS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "play.py"
RUN_TOP = [numbered_id(s, r) for s in range(NUM_SUITS) for r in (1, 2, 3)]
WIN_DECK = [CARD_CODES[c] for c in RUN_TOP + [c for c in range(DECK_SIZE) if c not in RUN_TOP]]


def play(args: list[str], stdin: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_threatening_the_run_cards_wins_and_names_are_accepted() -> None:
    moves = ["threaten", "0", "Threaten", " threaten "] + ["0"] * 8
    result = play(["--deck", " ".join(WIN_DECK)], "\n".join(moves) + "\n")
    assert result.returncode == 0, result.stderr
    assert "Game over: won" in result.stdout
    assert result.stdout.count("Cold Iron") == 13  # the table before and after each move


def test_bad_input_is_reprompted_with_the_legal_choices() -> None:
    result = play(["--seed", "3"], "dance\nstop\n99\nquit\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "unknown action 'dance'" in out
    assert "'stop' is not legal now; legal: 0 threaten, 1 iron" in out
    assert "outside 0..18" in out
    assert "bye" in out


def test_eof_leaves_gracefully() -> None:
    result = play(["--seed", "1"], "iron\n")
    assert result.returncode == 0, result.stderr
    assert "end of input" in result.stdout
    assert "Traceback" not in result.stderr


def test_same_seed_same_deal_and_deck_file(tmp_path: Path) -> None:
    a = play(["--seed", "11"], "threaten\nquit\n").stdout
    b = play(["--seed", "11"], "threaten\nquit\n").stdout
    assert a == b
    deck_file = tmp_path / "deck.txt"
    deck_file.write_text(", ".join(WIN_DECK))
    result = play(["--deck", str(deck_file)], "0\nquit\n")
    assert "Hearts    A" in result.stdout


def test_bad_deck_is_refused_by_name() -> None:
    result = play(["--deck", "AH AH"], "")
    assert result.returncode == 2
    assert "54" in result.stderr


def test_save_and_resume(tmp_path: Path) -> None:
    save = tmp_path / "game.json"
    first = play(["--seed", "5"], f"threaten\niron\nsave {save}\nquit\n")
    assert first.returncode == 0, first.stderr
    data = json.loads(save.read_text())
    assert len(data["deck"]) == DECK_SIZE
    assert data["actions"][:2] == ["threaten", "iron"]
    resumed = play(["--load", str(save)], "quit\n")
    assert resumed.returncode == 0, resumed.stderr
    # The resumed table is the one the first session showed after its last move.
    last_table = first.stdout[first.stdout.rindex("Cold Iron") :].splitlines()[:7]
    assert "Last: Apply the Iron" in last_table[-1]
    assert resumed.stdout.splitlines()[:7] == last_table


def test_load_refuses_a_corrupt_save(tmp_path: Path) -> None:
    save = tmp_path / "bad.json"
    save.write_text(json.dumps({"deck": WIN_DECK, "env_kwargs": {}, "actions": ["stop"]}))
    result = play(["--load", str(save)], "")
    assert result.returncode == 2
    assert "action 0 ('stop') is not legal" in result.stderr
    save.write_text(json.dumps({"version": 99, "deck": WIN_DECK, "env_kwargs": {}, "actions": []}))
    result = play(["--load", str(save)], "")
    assert result.returncode == 2 and "version 99" in result.stderr
    variant = VARIANT_KEYS[0]  # a rule option that is not a bool: the options, not the deck
    save.write_text(json.dumps({"deck": WIN_DECK, "env_kwargs": {variant: "yes"}, "actions": []}))
    result = play(["--load", str(save)], "")
    assert result.returncode == 2
    assert "key 'env_kwargs'" in result.stderr and variant in result.stderr, result.stderr


def test_hint_without_planner_says_so() -> None:
    result = play(["--seed", "2", "--hint"], "quit\n")
    assert result.returncode == 0
    assert "planner" in result.stdout


def test_picture_command_writes_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "t.png"
    result = play(["--seed", "2", "--picture", str(target)], "iron\nquit\n")
    assert result.returncode == 0, result.stderr
    assert target.read_bytes()[:4] == b"\x89PNG"


def test_the_end_is_announced_once() -> None:
    moves = ["0"] * 12
    out = play(["--deck", " ".join(WIN_DECK)], "\n".join(moves) + "\n").stdout
    assert out.count("Game over") == 1 and "outcome:" not in out


def test_hints_say_why_when_no_action_can_win() -> None:
    """Rest three times over 2H, 5H and 8H: every Hearts window has lost a card, so the
    phrase can no longer be completed and every action shows 0.0%, with the reason."""
    top = ["2H", "5H", "8H"]
    deck = " ".join(top + [c for c in CARD_CODES if c not in top])
    out = play(["--deck", deck], "rest\n" * 3 + "hint\nquit\n").stdout
    hints = out[out.index("planner's estimated win chance") :].split("\n", 1)[1]  # its rows
    assert "0.0%" in hints and "%" not in hints.replace("0.0%", "")
    assert "can no longer be completed" in hints  # the reason, not only the zeros


def test_run_markers_mark_one_window() -> None:
    from coldiron_env.cards import SUIT_FIELD_MASK
    from coldiron_env.judge import run_cards
    from coldiron_env.render import suit_line

    spread = 0b0001010101  # A 3 5 7 of Hearts: four windows hold two cards each
    line = suit_line(spread, 0)
    assert line.split()[1:5] == ["*A", "*3", "5", "7"] and "run 2/3" in line
    # the lowest window whose missing card is still in the deck: 2H seen, 4H not
    assert run_cards(spread, SUIT_FIELD_MASK & ~0b10) == 0b0000010100  # *3 *5 (4 unseen)
    assert run_cards(0b111) == 0b111 and run_cards(0b1) == 0


@pytest.mark.parametrize("extra", [[], ["--load"]], ids=["deal", "saved game"])
def test_a_shipped_network_plays_a_game_on_its_own_observation(
    extra: list[str], tmp_path: Path
) -> None:
    """``--agent trained`` (a counting model) is shown the observation it was trained on."""
    args = ["--seed", "7"]
    if extra:
        save = tmp_path / "game.json"
        assert play(["--seed", "7"], f"threaten\nsave {save}\nquit\n").returncode == 0
        args = ["--load", str(save)]
    watched = play([*args, "--agent", "trained", "--delay", "0"], "")
    assert watched.returncode == 0, watched.stderr[-2000:]
    assert "trained plays:" in watched.stdout and "Game over" in watched.stdout


def test_watching_pauses_after_each_move_and_quits_on_q(tmp_path: Path) -> None:
    """Enter plays the next move, q stops at once; a loaded game goes on from its last move
    (the agent is not asked the moves already played), then out of input it plays to the end."""
    watched = play(["--seed", "7", "--agent", "heuristic"], "\n\nq\n")
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.count("heuristic plays:") == 3 and "Game over" not in watched.stdout
    save = tmp_path / "game.json"
    human = play(["--seed", "7"], f"threaten\niron\nsave {save}\nquit\n").stdout
    loaded = human.split("> ")[-3]  # the table after the last move (then "saved", "bye")
    assert "Last: Apply the Iron" in loaded
    resumed = play(["--load", str(save), "--agent", "heuristic"], "")
    assert resumed.returncode == 0, resumed.stderr
    first = resumed.stdout.index("heuristic plays:")
    assert resumed.stdout[:first].strip() == loaded.strip()  # shown once, nothing replayed
    assert "Game over" in resumed.stdout


def test_every_action_name_as_shown_is_accepted_in_any_case() -> None:
    from coldiron_env.actions import ACTION_NAMES, parse_action

    for action, name in enumerate(ACTION_NAMES):
        assert parse_action(name) == action
        assert parse_action(name.upper()) == action
        assert parse_action(f"  {name.title()} ") == action
    with pytest.raises(ValueError, match="unknown action 'rack Z'"):
        parse_action("rack Z")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--seed", "-5"], "--seed must be >= 0, got -5"),
        (["--deck", "nope.txt"], "--deck 'nope.txt': no such file"),
        (["--picture", "."], "is a directory"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_the_game(args: list[str], named: str) -> None:
    result = play(args, "quit\n")
    assert result.returncode == 2
    assert named in result.stderr and "Traceback" not in result.stderr


def test_a_resumed_agent_knows_the_moves_replayed_and_every_agent_plays_on(
    tmp_path: Path,
) -> None:
    """A loaded game's moves are shown to the agent (``Agent.replay``): at each decision it
    knows what a player who watched the whole game knows, and players that track the game
    (the planner's knowledge, mcts's OpenSpiel state) play on from there."""
    from helpers import load_file

    from agents.players.heuristic import HeuristicAgent
    from coldiron_env.knowledge import Knowledge

    module = load_file(SCRIPT, "play_script_resumed")
    first = module.Session(None, 3, {})
    for action in (16, 16, 16, 0):  # rest x3, threaten: discards the player must remember
        first.step(action)
    resumed = module.Session(first.deck, None, {})
    for action in first.actions:
        resumed.step(action)
    known: list[tuple[Knowledge, Knowledge]] = []

    class Spy(HeuristicAgent):
        def act(self, obs: Any, action_mask: Any, info: Any = None) -> int:
            action = super().act(obs, action_mask, info)
            known.append((dataclasses.replace(self.knowledge), Knowledge.from_game(resumed.game)))
            return action

    module.agent_loop(resumed, Spy(), 0.0, 0, lambda _text: None)
    assert len(resumed.actions) > len(first.actions), "the agent played on"
    assert [mine for mine, _ in known] == [truth for _, truth in known]
    save = tmp_path / "game.json"
    first.save(save)
    for agent in ("planner-small", "mcts"):  # lost track of the discards before (a crash)
        watched = play(["--load", str(save), "--agent", agent, "--delay", "0"], "")
        assert watched.returncode == 0, watched.stderr[-2000:]
        assert f"{agent} plays:" in watched.stdout and "Game over" in watched.stdout


def test_an_agent_watched_in_a_rule_variant_is_told_the_rules() -> None:
    from helpers import load_file

    from agents.players.heuristic import HeuristicAgent
    from coldiron_env.options import RuleOptions

    module = load_file(SCRIPT, "play_script_rules")
    told: list[RuleOptions] = []

    class Spy(HeuristicAgent):
        def set_rules(self, rules: RuleOptions) -> None:
            told.append(rules)
            super().set_rules(rules)

    session = module.Session(None, 3, {"bonus_joker_grants_more": True, "turns": 20})
    module.agent_loop(session, Spy(), 0.0, 0, lambda _text: None)
    assert told and told[-1].bonus_joker_grants_more and told[-1].turns == 20


def test_seed_with_a_deck_seeds_the_watched_agent() -> None:
    """``--deck`` gives the deal; ``--seed`` then seeds the agent (random play repeats)."""
    args = ["--deck", " ".join(WIN_DECK[::-1]), "--agent", "random", "--delay", "0"]
    first, again = (play([*args, "--seed", "1"], "") for _ in range(2))
    other = play([*args, "--seed", "2"], "")
    assert first.returncode == again.returncode == other.returncode == 0, first.stderr
    assert "random plays:" in first.stdout and first.stdout == again.stdout
    assert other.stdout != first.stdout


def test_the_hints_are_shown_once_a_position_and_help_is_announced() -> None:
    """A command (help, a bad action) answers itself without reprinting the hint table,
    which pushed the answer off the screen; a move shows the new position's hints."""
    result = play(["--seed", "2", "--hint"], "help\ndance\nthreaten\nquit\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "(type help for the commands)" in out
    assert out.count("planner's estimated win chance") == 2  # the start, then after threaten
    assert out.index("Commands: save FILE") < out.index("unknown action 'dance'")
