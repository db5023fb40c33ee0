"""The pages' pictures and measures for the docs: a report of two agents on 10,000 deals (its
size, how long Chromium takes to open it and to show a deal) and the play page, screenshot.

    .venv/bin/python -m lab.web_pages --json docs/records/web_pages.json \\
        --report-png docs/report.png --play-png docs/play.png

Plays ``heuristic`` and ``planner`` on ``--episodes`` evaluation deals of ``--seed`` (not the
report seed), writes the report in a temporary folder, opens it in Debian's Chromium
(Playwright) at a decision the planner searched, and the play page on a seeded deal with a
hint shown.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agents.atomic import atomic_write_json
from agents.evaluation.arena import evaluate, paired_lines
from agents.gitinfo import code_stamp
from agents.registry import make_agent
from agents.web.report import estimates, write_report
from agents.web.server import PlayServer
from agents.web.views import replay
from coldiron_env.options import DEFAULT_RULES
from lab.main_job import cpu_name

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
AGENTS = ("heuristic", "planner")


def shoot(page: Any, path: Path) -> None:
    with tempfile.NamedTemporaryFile(suffix=".png") as tmp:  # then atomically into place
        page.screenshot(path=tmp.name, full_page=False)
        from agents.atomic import atomic_write_bytes

        atomic_write_bytes(path, Path(tmp.name).read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--report-png", type=Path, required=True)
    parser.add_argument("--play-png", type=Path, required=True)
    args = parser.parse_args(argv)
    stamp = code_stamp([args.json, args.report_png, args.play_png])
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    results = evaluate([(n, make_agent(n)) for n in AGENTS], args.episodes, args.seed, keep=True)
    played = time.perf_counter() - started
    about = {"episodes": args.episodes, "seed": args.seed, "deal_set": "evaluation",
             "command": f"scripts/evaluate.py --agent heuristic --agent planner --episodes "
             f"{args.episodes} --seed {args.seed} --html DIR"}  # fmt: skip
    planner = results[1]
    deal = next(d for d, records in enumerate(planner.decisions) if records)
    with tempfile.TemporaryDirectory(prefix="coldiron-report-") as folder:
        started = time.perf_counter()
        path = write_report(Path(folder), results, paired_lines(results, "heuristic"), about,
                            DEFAULT_RULES)  # fmt: skip
        written = time.perf_counter() - started
        size = path.stat().st_size
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            started = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector(".column .table")
            opened = time.perf_counter() - started
            game = planner.games[deal]
            states = replay(game.deck, game.actions, DEFAULT_RULES)
            planned = min(estimates(states, planner.decisions[deal]))
            started = time.perf_counter()
            page.evaluate(f"location.hash = '#deal={deal}&step={planned}&a=planner&b=heuristic'")
            page.wait_for_function(
                f"document.querySelector('.where').textContent.startsWith('step {planned} ')"
            )
            shown = time.perf_counter() - started
            page.evaluate("window.scrollTo(0, document.getElementById('replay').offsetTop - 150)")
            shoot(page, args.report_png)
            server = PlayServer(0)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            play = browser.new_page(viewport={"width": 1000, "height": 760})
            play.goto(f"{server.url}?seed=11")
            for action in (0, 0, 1):
                moves = play.evaluate("document.body.dataset.moves")
                play.click(f"button.action[data-action='{action}']")
                play.wait_for_function(f"document.body.dataset.moves !== '{moves}'")
            play.click("#hint")
            play.wait_for_selector("#hint-table tr")
            shoot(play, args.play_png)
            server.shutdown()
            browser.close()
    doc = {
        "agents": list(AGENTS),
        "episodes": args.episodes,
        "seed": args.seed,
        "report_bytes": size,
        "evaluation_seconds": round(played, 1),
        "report_seconds": round(written, 1),
        "open_seconds": round(opened, 2),
        "shown": {"deal": deal, "step": planned, "seconds": round(shown, 2)},
        "machine": cpu_name(),
        "command": shlex.join([".venv/bin/python", "-m", "lab.web_pages", *(argv or sys.argv[1:])]),
        **stamp,
    }
    atomic_write_json(args.json, doc)
    print(f"report of {args.episodes:,} deals: {size / 1e6:.1f} MB, opened in {opened:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
