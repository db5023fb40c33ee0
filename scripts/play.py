"""Play Cold Iron in the terminal, or watch an agent play.

At the prompt type an action by number or name (``threaten``, ``iron``,
``rack 7``, ``rack hearts``, ``rest``, ``stop``, ``bonus``), or a command:
``save FILE`` (the deal, options and actions so far, as JSON), ``picture FILE``
(the table as a PNG, needs matplotlib), ``hint`` (the planner's win chances),
``help``, ``quit``. Input is read from standard input, so a game can be scripted.

    .venv/bin/python scripts/play.py --seed 7                 # a seeded deal
    .venv/bin/python scripts/play.py --deck deck.txt          # 54 codes from a file (or inline)
    .venv/bin/python scripts/play.py --agent heuristic --delay 0.5
    .venv/bin/python scripts/play.py --load game.json         # resume a saved game
    .venv/bin/python scripts/play.py --web [--port 8000]      # play in the browser instead
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

import numpy as np

from agents.atomic import atomic_target, atomic_write_json
from agents.cli import EXIT_INTERRUPTED, command_parser, refuse
from agents.evaluation.lockstep import Move, play_lockstep
from agents.evaluation.stats import Z_95
from agents.players.base import Agent, RuleAware
from agents.players.planner import HINT_SAMPLES, action_win_chances, why_hopeless
from agents.registry import make_agent, set_torch_threads
from agents.web.views import SAVE_VERSION, save_document
from coldiron_env.actions import ACTION_NAMES, LEGAL_ACTIONS, PHASE_TURN, parse_action
from coldiron_env.cards import deck_codes, parse_deck
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import Game
from coldiron_env.knowledge import Knowledge
from coldiron_env.observation import OBSERVATION_OPTIONS
from coldiron_env.options import VARIANT_KEYS, RuleOptions, add_variant_flags, variants_of
from coldiron_env.render import legal_summary, render_text

QUIT_WORDS: Final = ("quit", "exit", "q")

HELP: Final = (
    "Type an action by number or name: threaten, iron, rack 7, rack hearts, rest, stop, bonus.\n"
    "Commands: save FILE, picture FILE, hint, help, quit."
)


class UserError(Exception):
    """Bad input from the command line or a file, with a message for the player."""


def read_deck(spec: str) -> list[str]:
    """54 card codes from a file holding them, or from the text itself (spaces/commas)."""
    path = Path(spec)
    text = path.read_text() if path.is_file() else spec
    codes = text.replace(",", " ").split()
    if len(codes) == 1 and not path.is_file():
        raise UserError(f"--deck {spec!r}: no such file, and not 54 card codes")
    try:
        parse_deck(codes)
    except ValueError as err:
        source = f"file {str(path)!r}" if path.is_file() else "--deck"
        raise UserError(f"{source}: {err}") from None
    return codes


class Session:
    """One game at the table: the env, the deal and the actions taken."""

    def __init__(
        self, deck: list[str] | None, seed: int | None, env_kwargs: dict[str, Any]
    ) -> None:
        self.env_kwargs = env_kwargs
        self.env = ColdIronEnv(render_mode="ansi", **env_kwargs)
        options = {"deck": deck} if deck is not None else None
        self.env.reset(seed=seed, options=options)
        self.deck = deck_codes(self.env.game.deck)
        self.actions: list[int] = []
        self.done = False

    @property
    def game(self) -> Game:
        return self.env.game

    def step(self, action: int) -> None:
        terminated = self.env.step(action)[2]
        self.actions.append(action)
        self.done = bool(terminated)

    def save(self, path: Path) -> None:
        atomic_write_json(path, save_document(self.deck, self.env_kwargs, self.actions))

    @classmethod
    def load(cls, path: Path, observes: dict[str, Any] | None = None) -> Session:
        """The saved game, replayed; ``observes``: observation options of the agent watching."""
        where = f"saved game {str(path)!r}"
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise UserError(f"cannot read {where}: {err}") from None
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a JSON object")
        if data.get("version", SAVE_VERSION) != SAVE_VERSION:
            raise UserError(
                f"{where}: version {data['version']!r}; this play.py reads version {SAVE_VERSION}"
            )
        for key in ("deck", "env_kwargs", "actions"):
            if key not in data:
                raise UserError(f"{where}: missing key {key!r}")
        kwargs = data["env_kwargs"]
        if not isinstance(kwargs, dict) or set(kwargs) - set(VARIANT_KEYS):
            raise UserError(
                f"{where}: key 'env_kwargs' must hold only {list(VARIANT_KEYS)}, got {kwargs!r}"
            )
        try:
            RuleOptions.from_kwargs(kwargs)
        except (TypeError, ValueError) as err:
            raise UserError(f"{where}: key 'env_kwargs': {err}") from None
        try:
            session = cls(list(data["deck"]), None, {**kwargs, **(observes or {})})
        except ValueError as err:
            raise UserError(f"{where}: key 'deck': {err}") from None
        for index, name in enumerate(data["actions"]):
            try:
                action = parse_action(str(name))
            except ValueError as err:
                raise UserError(f"{where}: action {index}: {err}") from None
            if session.done or action not in LEGAL_ACTIONS[session.game.phase]:
                raise UserError(f"{where}: action {index} ({name!r}) is not legal there")
            session.step(action)
        return session


def save_picture(game: Game, path: Path) -> None:
    from coldiron_env.picture import draw_table

    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("saving a picture needs matplotlib (pip install coldiron[train])") from None
    with atomic_target(path, suffix=".png") as tmp:
        plt.imsave(tmp, draw_table(game))


HINT_MARGIN: Final = Z_95 * math.sqrt(0.25 / HINT_SAMPLES)
"""The widest 95% margin of a chance estimated on the hint's orders (at 1/2): about 0.07."""


def planner_hints(session: Session) -> str:
    """The planner's estimated win chance for each legal action, and why when none can win."""
    game = session.game
    kn = Knowledge.from_game(game)
    chances = action_win_chances(kn, session.actions)
    if not chances:
        return "the game is over: no action to estimate"
    lines = [f"  {a:2d} {ACTION_NAMES[a]:<14} {p:6.1%}" for a, p in sorted(chances.items())]
    text = (
        f"planner's estimated win chance (each from {HINT_SAMPLES} sampled orders of the "
        f"deck: within about {HINT_MARGIN:.0%} either way, at 95%):\n" + "\n".join(lines)
    )
    if any(chances.values()):
        return text
    why = why_hopeless(kn) if game.phase == PHASE_TURN else None
    return f"{text}\n" + (
        why
        or f"no action won any of the {HINT_SAMPLES} sampled orders of the deck: "
        "a win is rare from here, if it is possible at all"
    )


def human_loop(session: Session, hint: bool, out: Callable[[str], None]) -> int:
    out(render_text(session.game))
    out("(type help for the commands)")
    shown = False  # the hints of this position printed (not again after a command)
    while not session.done:
        if hint and not shown:
            out(planner_hints(session))
            shown = True
        try:
            line = input("> ")
        except EOFError:
            out("\n(end of input: leaving the game unfinished)")
            return 0
        text = line.strip()
        if not text:
            continue
        word, _, rest = text.partition(" ")
        word = word.lower()
        try:
            if word in QUIT_WORDS:
                out("bye")
                return 0
            if word in ("help", "hint"):
                out(HELP if word == "help" else planner_hints(session))
                continue
            if word in ("save", "picture"):
                target = Path(rest.strip())
                if not rest.strip():
                    out(f"usage: {word} FILE")
                elif word == "save":
                    session.save(target)
                    out(f"saved to {target}")
                else:
                    save_picture(session.game, target)
                    out(f"picture written to {target}")
                continue
        except (UserError, OSError) as err:
            out(f"error: {err}")
            continue
        legal = LEGAL_ACTIONS[session.game.phase]
        try:
            action = parse_action(text)
        except ValueError as err:
            out(f"{err}\nlegal now: {legal_summary(legal)}")
            continue
        if action not in legal:
            out(f"{ACTION_NAMES[action]!r} is not legal now; legal: {legal_summary(legal)}")
            continue
        session.step(action)
        shown = False
        out(render_text(session.game))
    return 0


def load_agent(spec: str) -> tuple[Any, dict[str, Any]]:
    """The agent named ``spec`` and the observation options it was trained with."""
    set_torch_threads()
    try:
        agent = make_agent(spec)
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise UserError(f"--agent {spec!r}: {err}") from None
    trained = getattr(agent, "env_kwargs", {})
    return agent, {k: trained[k] for k in OBSERVATION_OPTIONS if k in trained}


class _Quit(Exception):
    """The watcher quit between two moves."""


class _Resumed(Agent):
    """``agent`` after the moves already played (a loaded game): it sees them played
    (:meth:`Agent.replay`), then decides."""

    def __init__(self, agent: Agent, opening: list[int]) -> None:
        self.agent, self.opening = agent, list(opening)

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        if not self.opening:
            return self.agent.act(obs, action_mask, info)
        action = self.opening.pop(0)
        self.agent.replay(obs, action_mask, info, action)
        return action


def agent_loop(
    session: Session, agent: Any, delay: float | None, seed: int | None, out: Callable[[str], None]
) -> int:
    """``agent`` plays the session's game on (the moves so far replayed), shown move by move."""
    name = getattr(agent, "name", "agent")
    opening = len(session.actions)
    pause = delay is None
    out(render_text(session.game))

    if isinstance(agent, RuleAware):
        agent.set_rules(session.env.rules)  # a variant's flags, as evaluation tells it

    def seat(_game: int) -> Agent:
        agent.reset(seed)
        return _Resumed(agent, session.actions)

    def moved(move: Move) -> None:
        nonlocal pause, opening
        if opening:
            opening -= 1
            return
        out(f"{name} plays: {move.action} {ACTION_NAMES[move.action]}")
        session.actions.append(move.action)
        session.done = move.terminated
        out(render_text(session.game))
        if pause:
            try:
                line = input("[Enter] next, q quits > ")
            except EOFError:
                pause = False  # no keyboard: play on to the end
                return
            if line.strip().lower() in QUIT_WORDS:
                raise _Quit
        elif delay:
            time.sleep(delay)

    deal = [{"options": {"deck": session.deck}}]
    with contextlib.suppress(_Quit):
        play_lockstep(seat, session.env_kwargs, deal, envs=[session.env], on_move=moved)
    return 0


def serve(port: int, out: Callable[[str], None]) -> int:
    """``--web``: the play page's server on 127.0.0.1 until Ctrl-C."""
    from agents.web.server import PlayServer

    try:
        server = PlayServer(port)
    except OSError as err:
        print(f"error: --port {port}: {err.strerror}", file=sys.stderr)
        return 2
    out(f"Cold Iron: play at {server.url} (Ctrl-C stops the server)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out("\nstopped")
    finally:
        server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(__doc__)
    add = parser.add_argument
    add("--seed", type=int, help="seed of the deal and of the watched agent's choices "
        "(with --deck: of the agent's)")  # fmt: skip
    add("--deck", help="file of 54 card codes, or the codes inline")
    add("--load", type=Path, help="resume a game saved with 'save'")
    add("--agent", help="watch an agent: a name or a run directory")
    add("--delay", type=float, help="seconds between agent moves (default: Enter)")
    add("--hint", action="store_true", help="show the planner's win chances")
    add("--picture", type=Path, help="write the final table as PNG")
    add("--web", action="store_true", help="serve a page to play on at 127.0.0.1 (prints its URL)")
    add("--port", type=int, default=0, help="--web: the port (default: any free one)")
    add_variant_flags(parser)
    args = parser.parse_args(argv)
    if args.delay is not None and args.delay < 0:
        parser.error(f"--delay must be >= 0, got {args.delay}")
    if args.seed is not None and args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    if args.web and (args.agent or args.load or args.deck or args.picture or args.hint):
        parser.error("--web serves the page alone: deal, hint and save there")
    if args.picture is not None and args.picture.is_dir():
        parser.error(f"--picture {args.picture}: is a directory, not a file")
    if args.load is not None and (args.deck is not None or args.seed is not None):
        parser.error("--load replays its own deal: do not combine it with --deck or --seed")

    out = partial(print, flush=True)
    if args.web:
        return serve(args.port, out)
    try:
        agent, observes = load_agent(args.agent) if args.agent is not None else (None, {})
        if args.load is not None:
            session = Session.load(args.load, observes)
        else:
            deck = read_deck(args.deck) if args.deck is not None else None
            session = Session(deck, args.seed, {**variants_of(args), **observes})
        if agent is not None:
            code = agent_loop(session, agent, args.delay, args.seed, out)
        else:
            code = human_loop(session, args.hint, out)
        if args.picture is not None:
            save_picture(session.game, args.picture)
            out(f"picture written to {args.picture}")
    except UserError as err:
        return refuse(err)
    except OSError as err:  # the final picture's file
        return refuse(f"{err.filename}: {err.strerror}")
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
