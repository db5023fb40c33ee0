"""The pages' Python side (agents/web): the states a report replays are the engine's, the report
holds every game and search estimate, and the play server answers as the engine rules, 4xx for
anything else, with no state shared between games, under load too. The pages themselves in a
real browser: tests/test_browser.py."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import load_file

from agents.evaluation.arena import evaluate, paired_lines
from agents.registry import make_agent
from agents.web.report import write_report
from agents.web.server import PlayServer
from agents.web.views import META, replay
from coldiron_env.actions import LEGAL_ACTIONS, PHASE_NAMES
from coldiron_env.cards import CARD_CODES, deck_codes
from coldiron_env.dealer import shuffled_deck
from coldiron_env.env import ColdIronEnv
from coldiron_env.options import DEFAULT_RULES

ROOT = Path(__file__).resolve().parents[1]


def decode(chars: str) -> list[str]:
    return [CARD_CODES[META["chars"].index(c)] for c in chars]


def test_a_replayed_state_is_what_the_env_reports_at_that_step() -> None:
    """Each state of a replay, read back, against the env's own ``info`` after the same actions
    (an independent path: the env's info is not built by agents.web.views)."""
    rng = np.random.default_rng(4)
    for seed in range(6):
        env = ColdIronEnv()
        _, info = env.reset(seed=seed)
        deck, actions, infos = list(env.game.deck), [], [info]
        while not env.game.over:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            _, _, _, _, info = env.step(action)
            actions.append(action)
            infos.append(info)
        states = replay(deck, actions, DEFAULT_RULES)
        assert len(states) == len(actions) + 1 and [s[0] for s in states] == [*actions, -1]
        for state, info in zip(states, infos, strict=True):
            _, turn, hurt, left, phase, iron, hand, drawn, _, runs = state
            assert (turn, hurt, left, PHASE_NAMES[phase], iron) == (
                info["turn"], info["hurt"], info["deck_count"], info["phase"], info["iron_count"]
            )  # fmt: skip
            assert sorted(decode(hand)) == sorted(info["hand"])
            assert decode(drawn) == info.get("drawn", [])
            assert len(runs) == 4 and set(runs) <= set("0123")


def read_report(path: Path) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """A written report's summary and every deal's games, as its page reads them."""
    page = path.read_text(encoding="utf-8")
    summary = json.loads(re.search(r'id="summary">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    packed = json.loads(re.search(r'id="chunks">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    deals: dict[int, dict[str, Any]] = {}
    for chunk in packed:
        deals.update(
            {int(k): v for k, v in json.loads(gzip.decompress(base64.b64decode(chunk))).items()}
        )
    return summary, deals


def test_a_report_holds_every_game_replayed_and_the_searchs_estimates(tmp_path: Path) -> None:
    agents = [
        ("heuristic", make_agent("heuristic")),
        ("planner-small", make_agent("planner-small")),
    ]
    results = evaluate(agents, 30, 5, keep=True)
    about = {"episodes": 30, "seed": 5, "deal_set": "evaluation", "command": "a test"}
    path = write_report(tmp_path, results, paired_lines(results, "heuristic"), about, DEFAULT_RULES)
    summary, deals = read_report(path)
    assert [a["agent"] for a in summary["agents"]] == ["heuristic", "planner-small"]
    assert summary["paired"][0]["agent"] == "planner-small" and len(deals) == 30
    planned = 0
    for result, row in zip(results, summary["agents"], strict=True):
        assert row["wins"] == result.wins and row["searches"] == bool(result.decisions)
        for deal, game in enumerate(result.games):
            shown = deals[deal][result.agent]
            assert shown["s"] == replay(game.deck, game.actions, DEFAULT_RULES)
            assert row["by_deal"][deal] == str(META["outcomes"].index(game.outcome))
            for step, chances in shown.get("e", {}).items():
                state = shown["s"][int(step)]
                assert state[1] >= 18 and {a for a, _ in chances} <= set(LEGAL_ACTIONS[state[4]])
                assert state[0] in {a for a, _ in chances}  # the action it took was weighed
                planned += 1
    assert planned > 0, "the planner's searches reach the page"
    assert "</script>" not in path.read_text().split('id="summary">')[1].split("</script>")[0]


@pytest.fixture
def server() -> Iterator[PlayServer]:
    running = PlayServer(0)
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.shutdown()
    running.server_close()


def call(server: PlayServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
    reply = connection.getresponse()
    payload = reply.read()
    connection.close()
    kind = reply.getheader("Content-Type", "")
    return reply.status, json.loads(payload) if kind.startswith("application/json") else payload


def test_the_server_plays_as_the_engine_and_refuses_the_rest(server: PlayServer) -> None:
    code, game = call(server, "POST", "/games", {"seed": 7})
    assert code == 200
    env = ColdIronEnv()
    _, info = env.reset(seed=7)  # --seed 7 of play.py: the same deal
    assert sorted(decode(game["state"][6])) == sorted(info["hand"]) and game["legal"]
    base = f"/games/{game['id']}"
    before = call(server, "GET", base)[1]
    refusals = [
        ("POST", f"{base}/act", {"action": 17}, 409),  # Stop is not legal at a turn's start
        ("POST", f"{base}/act", {"action": "threaten"}, 400),
        ("POST", f"{base}/act", {"action": 99}, 409),
        ("POST", f"{base}/act", {"move": 0}, 400),
        ("POST", f"{base}/act", b"{not json", 400),
        ("POST", f"{base}/act", b"x" * 20_000, 413),
        ("POST", f"/games/{'0' * 32}/act", {"action": 0}, 404),
        ("GET", "/etc/passwd", None, 404),
        ("POST", "/games", {"seed": -1}, 400),
        ("POST", "/games", {"deck": ["AH"] * 54}, 400),
        ("POST", "/games", {"colour": "red"}, 400),
        ("GET", f"{base}/act", None, 405),
    ]
    for method, path, body, expected in refusals:
        code, reply = call(server, method, path, body)
        assert code == expected and "error" in reply, (path, body, code, reply)
    assert call(server, "GET", base)[1] == before, "a refused request changed the game"
    code, after = call(server, "POST", f"{base}/act", {"action": 0})
    _, _, _, _, info = env.step(0)
    assert code == 200 and after["state"][1:4] == [info["turn"], info["hurt"], info["deck_count"]]
    code, hint = call(server, "POST", f"{base}/hint")
    assert code == 200 and set(map(int, hint["chances"])) == set(after["legal"])


def test_a_saved_game_loads_in_play_py_at_the_same_state(
    server: PlayServer, tmp_path: Path
) -> None:
    deck = deck_codes(shuffled_deck(np.random.default_rng(3)))
    _, game = call(server, "POST", "/games", {"deck": deck})
    for action in (0, 0, 1):
        status = call(server, "POST", f"/games/{game['id']}/act", {"action": action})[1]
    saved = tmp_path / "game.json"
    saved.write_text(json.dumps(call(server, "GET", f"/games/{game['id']}/save")[1]))
    play = load_file(ROOT / "scripts" / "play.py", "play_for_web_test")
    session = play.Session.load(saved)
    assert session.deck == deck and session.actions == [0, 0, 1]
    assert (session.game.turn, session.game.hurt, session.game.deck_count) == tuple(
        status["state"][1:4]
    )


def play_games(server: PlayServer, client: int, games: int, failures: list[str]) -> None:
    """One client: ``games`` whole games, random legal moves of its own; each ending checked
    against the engine's replay of the same deal and moves (a mixed-up state would differ)."""
    rng = np.random.default_rng(client)
    for g in range(games):
        seed = 1000 * client + g
        code, status = call(server, "POST", "/games", {"seed": seed})
        actions = []
        while code == 200 and status["legal"]:
            action = int(rng.choice(status["legal"]))
            actions.append(action)
            code, status = call(server, "POST", f"/games/{status['id']}/act", {"action": action})
        deck = shuffled_deck(np.random.default_rng(seed))
        if code != 200 or status["state"] != replay(deck, actions, DEFAULT_RULES)[-1]:
            failures.append(f"client {client} game {g}: {code} {status}")


@pytest.mark.slow
def test_fifty_clients_playing_four_games_each_share_nothing(server: PlayServer) -> None:
    failures: list[str] = []
    clients = [
        threading.Thread(target=play_games, args=(server, c, 4, failures)) for c in range(50)
    ]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=600)
    assert not any(t.is_alive() for t in clients), "a client never finished"
    assert failures == []
    assert len(server.tables) == 200
