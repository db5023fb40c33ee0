"""The pages in a real browser (Debian's headless Chromium, driven by Playwright): the report
opens with no console error and shows at each step the state the engine had; the keyboard and
the URL's fragment move through it; two agents side by side show where their choices part; a
whole game is played on the play page by clicks and ends as the engine ends it; a hint appears.

Skipped where Chromium or Playwright is missing, unless ``COLDIRON_REQUIRE_BROWSER`` is set
(CI sets it: there these tests must run)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.evaluation.arena import evaluate, paired_lines
from agents.registry import make_agent
from agents.web.report import write_report
from agents.web.server import PlayServer
from coldiron_env.cards import CARD_CODES
from coldiron_env.dealer import shuffled_deck
from coldiron_env.game import Game
from coldiron_env.options import DEFAULT_RULES

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("COLDIRON_REQUIRE_BROWSER"):
            raise
        pytest.skip("playwright is not installed (the dev extra)")
    if not Path(CHROMIUM).is_file():
        if os.environ.get("COLDIRON_REQUIRE_BROWSER"):
            pytest.fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
        pytest.skip("no Chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function("window.coldironReady !== undefined")
    return page, errors


def shown(page: Any, column: str = ".column") -> dict[str, Any]:
    """What a table on the page shows, read from its elements."""
    table = page.locator(f"{column} .table").first
    held = table.locator(".held .card").evaluate_all("cards => cards.map(c => c.dataset.card)")
    drawn = table.locator(".drawn .card").evaluate_all("cards => cards.map(c => c.dataset.card)")
    return {
        "turn": int(table.locator(".turn").get_attribute("data-turn")),
        "hurt": int(table.locator("[data-hurt]").get_attribute("data-hurt")),
        "deck": int(table.locator(".deck").get_attribute("data-deck")),
        "phase": table.locator(".phase").get_attribute("data-phase"),
        "hand": sorted(held),
        "drawn": drawn,
    }


def engine_at(deck: list[int], actions: list[int], step: int) -> dict[str, Any]:
    """What the engine holds after the first ``step`` actions."""
    game = Game(deck, DEFAULT_RULES)
    for action in actions[:step]:
        game.step(action)
    hand = [CARD_CODES[c] for c in range(40) if game.hand >> c & 1]
    return {"turn": game.turn, "hurt": game.hurt, "deck": game.deck_count,
            "phase": game.phase_name, "hand": sorted(hand),
            "drawn": [CARD_CODES[c] for c in game.drawn]}  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    agents = [(name, make_agent(name)) for name in ("heuristic", "planner-small")]
    results = evaluate(agents, 40, 5, keep=True)
    about = {"episodes": 40, "seed": 5, "deal_set": "evaluation", "command": "a test"}
    out = tmp_path_factory.mktemp("report")
    path = write_report(out, results, paired_lines(results, "heuristic"), about, DEFAULT_RULES)
    return path, results


def test_the_report_replays_the_engines_states_and_moves_by_keyboard(
    browser: Any, report: tuple[Path, list[Any]]
) -> None:
    path, results = report
    heuristic = results[0]
    page, errors = open_page(browser, f"{path.as_uri()}#deal=0&step=0&a=heuristic&b=")
    for deal in (0, 7, 23):
        game = heuristic.games[deal]
        deck, actions = list(game.deck), list(game.actions)
        for step in sorted({0, 1, len(actions) // 2, len(actions)}):
            page.evaluate(f"location.hash = '#deal={deal}&step={step}&a=heuristic&b='")
            page.wait_for_function(
                f"document.querySelector('.where').textContent.startsWith('step {step} ')"
            )
            assert shown(page) == engine_at(deck, actions, step), (deal, step)
    page.evaluate("location.hash = '#deal=7&step=2&a=heuristic&b='")
    page.wait_for_function("document.querySelector('.where').textContent.startsWith('step 2 ')")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("location.hash.includes('step=3')")
    assert shown(page) == engine_at(
        list(heuristic.games[7].deck), list(heuristic.games[7].actions), 3
    )
    assert errors == []


def test_two_agents_side_by_side_show_where_their_choices_part(
    browser: Any, report: tuple[Path, list[Any]]
) -> None:
    path, results = report
    a, b = results
    parted = [d for d in range(40) if a.games[d].actions != b.games[d].actions]
    assert parted, "the planner plays otherwise on some deal"
    deal = parted[0]
    first = next(
        i
        for i, (x, y) in enumerate(zip(a.games[deal].actions, b.games[deal].actions, strict=False))
        if x != y
    )
    page, errors = open_page(
        browser, f"{path.as_uri()}#deal={deal}&step={first}&a=heuristic&b=planner-small"
    )
    page.wait_for_selector(".column >> nth=1")
    assert f"choices part at step {first}" in page.locator(".column").first.inner_text()
    chosen = page.locator(".column .action.chosen").evaluate_all(
        "bs => bs.map(b => +b.dataset.action)"
    )
    assert chosen == [a.games[deal].actions[first], b.games[deal].actions[first]]
    ends = page.locator(".column h3").all_inner_texts()
    assert ends[0].startswith(f"heuristic: {a.games[deal].outcome}")
    assert ends[1].startswith(f"planner-small: {b.games[deal].outcome}")
    assert errors == []


@pytest.fixture
def server() -> Iterator[PlayServer]:
    running = PlayServer(0)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.shutdown()
    running.server_close()


def test_a_whole_game_played_by_clicks_ends_as_the_engine_ends_it(
    browser: Any, server: PlayServer
) -> None:
    page, errors = open_page(browser, f"{server.url}?seed=11")
    page.wait_for_selector("button.action")
    page.click("#hint")
    page.wait_for_selector("#hint-table tr")
    hinted = page.locator("#hint-table tr").evaluate_all("rows => rows.map(r => +r.dataset.action)")
    legal = page.locator("button.action").evaluate_all("bs => bs.map(b => +b.dataset.action)")
    assert hinted == legal
    rng = np.random.default_rng(11)
    clicked: list[int] = []
    while page.locator("button.action").count():
        legal = page.locator("button.action").evaluate_all("bs => bs.map(b => +b.dataset.action)")
        action = int(rng.choice(legal))
        page.click(f"button.action[data-action='{action}']")
        clicked.append(action)
        page.wait_for_function(f"document.body.dataset.moves === '{len(clicked)}'")
    game = Game(shuffled_deck(np.random.default_rng(11)), DEFAULT_RULES)
    for action in clicked:
        game.step(action)
    assert page.locator(".outcome").get_attribute("data-outcome") == game.outcome
    assert errors == []
