"""A page to play Cold Iron on: ``scripts/play.py --web [--port N]`` serves it on 127.0.0.1.

Routes (JSON in and out; any other request, a malformed body, an unknown game or an action the
engine refuses is answered 4xx with ``{"error": ...}`` and changes nothing):

- ``GET /``: the page (``static/play.html``, drawn by ``static/viewer.js``); ``GET /meta``: the
  names it shows (:data:`agents.web.views.META`);
- ``POST /games`` ``{"seed": S}`` or ``{"deck": [54 codes]}`` (or ``{}``): a new game, its id;
- ``GET /games/ID``: the game's status; ``POST /games/ID/act`` ``{"action": A}``: play A;
- ``POST /games/ID/hint``: the planner's estimated win chance of each legal action;
- ``GET /games/ID/save``: the game in ``scripts/play.py``'s saved format (``--load`` resumes it).

The rules stay in the engine (:class:`~coldiron_env.game.Game`), one per game, each behind a
lock of its own: tabs never share a game. The standard library's ``ThreadingHTTPServer`` does
the job for one person's loopback page (a thread a request); a framework would add a
dependency and a server to learn for six routes.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections import OrderedDict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

import numpy as np

from agents.players.planner import action_win_chances, why_hopeless
from agents.web.report import STATIC
from agents.web.views import META, save_document, status
from coldiron_env.actions import PHASE_TURN
from coldiron_env.cards import deck_codes, parse_deck
from coldiron_env.dealer import shuffled_deck
from coldiron_env.env import SeedError, seed_value
from coldiron_env.game import Game, IllegalActionError
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import DEFAULT_RULES

HOST: Final = "127.0.0.1"
MAX_GAMES: Final = 10_000  # games kept (the oldest forgotten beyond): a page left open costs little
MAX_BODY: Final = 16_384  # bytes a request may send
GAME_PATH: Final = re.compile(r"/games/([0-9a-f]{32})(/act|/hint|/save)?")
ASSETS: Final = {"/": ("play.html", "text/html"), "/viewer.js": ("viewer.js", "text/javascript"),
                 "/play.js": ("play.js", "text/javascript"),
                 "/viewer.css": ("viewer.css", "text/css")}  # fmt: skip


class Refused(Exception):
    """A request the page answers with ``status`` and a message naming what was wrong."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Table:
    """One game: the engine, the deal as codes, the actions so far, a lock."""

    def __init__(self, deck: list[int]) -> None:
        self.game = Game(deck, DEFAULT_RULES)
        self.codes = deck_codes(deck)
        self.actions: list[int] = []
        self.lock = threading.Lock()

    def act(self, action: Any) -> dict[str, Any]:
        if isinstance(action, bool) or not isinstance(action, int):
            raise Refused(HTTPStatus.BAD_REQUEST, f"action must be an int, got {action!r}")
        with self.lock:
            if self.game.outcome is not None:
                raise Refused(HTTPStatus.CONFLICT, f"the game is over ({self.game.outcome})")
            try:
                self.game.step(action)
            except (IllegalActionError, ValueError) as err:
                raise Refused(HTTPStatus.CONFLICT, str(err)) from None
            self.actions.append(action)
            return status(self.game)

    def hint(self) -> dict[str, Any]:
        with self.lock:
            kn = Knowledge.from_game(self.game)
            actions = list(self.actions)
        if self.game.outcome is not None:
            return {"chances": {}, "why": "the game is over: no action to estimate"}
        chances = action_win_chances(kn, actions)
        why = why_hopeless(kn) if kn.phase == PHASE_TURN and not any(chances.values()) else None
        return {"chances": {str(a): p for a, p in chances.items()}, "why": why}


class PlayServer(ThreadingHTTPServer):
    """The play page's server: its games by id."""

    daemon_threads = True
    request_queue_size = 128  # connections waiting to be accepted (the default 5 resets a crowd)

    def __init__(self, port: int = 0) -> None:
        super().__init__((HOST, port), Handler)
        self.tables: OrderedDict[str, Table] = OrderedDict()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def new_table(self, request: Any) -> str:
        if not isinstance(request, dict) or set(request) - {"seed", "deck"}:
            raise Refused(HTTPStatus.BAD_REQUEST, 'expected {"seed": S} or {"deck": [54 codes]}')
        try:
            if request.get("deck") is not None:
                deck = parse_deck(request["deck"])
            else:
                deck = shuffled_deck(np.random.default_rng(seed_value(request.get("seed"))))
        except (SeedError, ValueError, TypeError) as err:
            raise Refused(HTTPStatus.BAD_REQUEST, str(err)) from None
        game_id = secrets.token_hex(16)
        with self.lock:
            self.tables[game_id] = Table(deck)
            while len(self.tables) > MAX_GAMES:
                self.tables.popitem(last=False)
        return game_id

    def table(self, game_id: str) -> Table:
        with self.lock:
            found = self.tables.get(game_id)
        if found is None:
            raise Refused(HTTPStatus.NOT_FOUND, f"no game {game_id} (a new page starts one)")
        return found


class Handler(BaseHTTPRequestHandler):
    server: PlayServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a quiet terminal: the URL is what the user needs

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    @property
    def route(self) -> str:
        return urlsplit(self.path).path  # the page's own ?seed=S is the page's

    def _get(self) -> Any:
        if self.route == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            return None
        if self.route in ASSETS:
            name, kind = ASSETS[self.route]
            self._send(HTTPStatus.OK, (STATIC / name).read_bytes(), kind)
            return None
        if self.route == "/meta":
            return META
        game_id, verb = self._game_path()
        table = self.server.table(game_id)
        if verb == "/save":
            with table.lock:
                return save_document(table.codes, {}, table.actions)
        if verb is None:
            with table.lock:
                return {"id": game_id, **status(table.game)}
        raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"{verb[1:]} is a POST")

    def _post(self) -> Any:
        request = self._body()
        if self.route == "/games":
            game_id = self.server.new_table(request)
            with self.server.table(game_id).lock:
                return {"id": game_id, **status(self.server.table(game_id).game)}
        game_id, verb = self._game_path()
        table = self.server.table(game_id)
        if verb == "/act":
            if not isinstance(request, dict) or set(request) != {"action"}:
                raise Refused(HTTPStatus.BAD_REQUEST, 'expected {"action": A}')
            return {"id": game_id, **table.act(request["action"])}
        if verb == "/hint":
            return table.hint()
        raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"POST to {self.route}")

    def _game_path(self) -> tuple[str, str | None]:
        match = GAME_PATH.fullmatch(self.route)
        if match is None:
            raise Refused(HTTPStatus.NOT_FOUND, f"no such page: {self.route}")
        return match.group(1), match.group(2)

    def _body(self) -> Any:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise Refused(HTTPStatus.BAD_REQUEST, "a bad Content-Length") from None
        if length > MAX_BODY:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"at most {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, UnicodeDecodeError) as err:
            raise Refused(HTTPStatus.BAD_REQUEST, f"not JSON: {err}") from None

    def _answer(self, route: Any) -> None:
        try:
            reply = route()
        except Refused as refused:
            self._send(refused.status, {"error": str(refused)})
            return
        if reply is not None:
            self._send(HTTPStatus.OK, reply)

    def _send(self, code: HTTPStatus, body: Any, kind: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)
