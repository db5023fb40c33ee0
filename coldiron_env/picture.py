"""Picture of the table for ``render_mode="rgb_array"``, drawn with NumPy alone.

:func:`draw_table` returns a fixed-size ``(FRAME_HEIGHT, FRAME_WIDTH, 3)`` ``uint8`` image:
the clock and turn, the Hurt bar, the deck count, the hand laid out by suit (one row per suit,
one slot per rank, run cards highlighted as in the text view via
:func:`coldiron_env.judge.run_cards`), the last action and the cards it drew, and the outcome
when the game is over. Text uses a small embedded 5x7 bitmap font: no imaging library needed.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from coldiron_env.actions import ACTION_LABELS
from coldiron_env.cards import (
    CARD_CODES,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_RANKS,
    NUM_SUITS,
    RANK_CODES,
    SUIT_NAMES,
    SUITS,
    suit_field,
)
from coldiron_env.game import Game
from coldiron_env.judge import HAS_RUN, run_cards
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT
from coldiron_env.render import clock

FRAME_HEIGHT: Final = 480
FRAME_WIDTH: Final = 640
FRAME_SHAPE: Final = (FRAME_HEIGHT, FRAME_WIDTH, 3)

Color = tuple[int, int, int]
FELT: Final[Color] = (22, 74, 46)
FELT_DARK: Final[Color] = (14, 50, 31)
INK_LIGHT: Final[Color] = (236, 236, 224)
INK_DIM: Final[Color] = (120, 160, 135)
CARD_FACE: Final[Color] = (246, 244, 236)
CARD_RUN: Final[Color] = (255, 221, 110)
CARD_EDGE: Final[Color] = (40, 40, 40)
RUN_EDGE: Final[Color] = (214, 150, 0)
SLOT_EDGE: Final[Color] = (48, 104, 72)
RED: Final[Color] = (196, 30, 40)
BLACK: Final[Color] = (25, 25, 30)
HURT_ON: Final[Color] = (210, 40, 40)
HURT_OFF: Final[Color] = (70, 40, 40)
CLOCK_ON: Final[Color] = (230, 190, 80)
CLOCK_OFF: Final[Color] = (50, 70, 55)
DECK_BACK: Final[Color] = (60, 70, 150)
WON_BANNER: Final[Color] = (30, 140, 60)
LOST_BANNER: Final[Color] = (150, 30, 30)
JOKER_INK: Final[Color] = (120, 40, 160)
SUIT_COLORS: Final[tuple[Color, ...]] = (RED, RED, BLACK, BLACK)  # H, D, C, S

GLYPH_WIDTH: Final = 5
GLYPH_HEIGHT: Final = 7

# 5x7 glyphs: seven rows of two hex digits each, bit 4 = the leftmost pixel.
# fmt: off
_FONT_HEX: Final = {
    "0": "0E11131519110E", "1": "040C040404040E", "2": "0E11010204081F", "3": "1F02040201110E",
    "4": "02060A121F0202", "5": "1F101E0101110E", "6": "0608101E11110E", "7": "1F010204080808",
    "8": "0E11110E11110E", "9": "0E11110F01020C", "A": "0E1111111F1111", "B": "1E11111E11111E",
    "C": "0E11101010110E", "D": "1C12111111121C", "E": "1F10101E10101F", "F": "1F10101E101010",
    "G": "0E11101711110F", "H": "1111111F111111", "I": "0E04040404040E", "J": "0702020202120C",
    "K": "11121418141211", "L": "1010101010101F", "M": "111B1515111111", "N": "11111915131111",
    "O": "0E11111111110E", "P": "1E11111E101010", "Q": "0E11111115120D", "R": "1E11111E141211",
    "S": "0F10100E01011E", "T": "1F040404040404", "U": "1111111111110E", "V": "11111111110A04",
    "W": "1111111515150A", "X": "11110A040A1111", "Y": "1111110A040404", "Z": "1F01020408101F",
    " ": "00000000000000", ":": "000C0C000C0C00", "/": "00010204081000", "-": "0000001F000000",
    ".": "00000000000C0C", ",": "000000000C0408", ";": "000C0C000C0408", "(": "02040808080402",
    ")": "08040202020408", "#": "0A0A1F0A1F0A0A", "*": "0004150E150400", "+": "0004041F040400",
    "%": "18190204081303", "?": "0E110102040004", "!": "04040404040004", "_": "0000000000001F",
}
# fmt: on
_COLUMN_BITS: Final = np.array([1 << (GLYPH_WIDTH - 1 - c) for c in range(GLYPH_WIDTH)])
FONT: Final[dict[str, np.ndarray]] = {
    ch: (np.array(list(bytes.fromhex(rows)))[:, None] & _COLUMN_BITS) != 0
    for ch, rows in _FONT_HEX.items()
}
"""``FONT[ch]``: a (7, 5) bool array; text is drawn upper-case, unknown characters as ``?``."""

# Layout (pixels).
MARGIN: Final = 12
TEXT_SCALE: Final = 2
HEADER_Y: Final = 10
STATUS_Y: Final = 40
BAR_HEIGHT: Final = 16
HURT_X: Final = 78
HURT_CELL: Final = 22
CLOCK_X: Final = 300
CLOCK_TICK: Final = 8
DECK_LABEL_X: Final = 520
HAND_Y: Final = 72
ROW_HEIGHT: Final = 70
LABEL_WIDTH: Final = 64
CARD_WIDTH: Final = 50
CARD_HEIGHT: Final = 62
CARD_GAP: Final = 6
LAST_Y: Final = 360
SMALL_CARD_WIDTH: Final = 34
SMALL_CARD_HEIGHT: Final = 46
SMALL_GAP: Final = 4
MAX_SHOWN_DRAWS: Final = 15
BORDER: Final = 2
BANNER_HEIGHT: Final = 40


def text_width(text: str, scale: int = TEXT_SCALE) -> int:
    return len(text) * (GLYPH_WIDTH + 1) * scale


def draw_text(
    img: np.ndarray, x: int, y: int, text: str, color: Color, scale: int = TEXT_SCALE
) -> None:
    """Draw ``text`` with its top-left corner at (x, y); clipped to the image."""
    height, width = img.shape[:2]
    for ch in text.upper():
        glyph = FONT.get(ch, FONT["?"])
        big = np.repeat(np.repeat(glyph, scale, axis=0), scale, axis=1)
        y1, x1 = min(y + big.shape[0], height), min(x + big.shape[1], width)
        if x >= width:
            break
        if y1 > y and x1 > x:
            img[y:y1, x:x1][big[: y1 - y, : x1 - x]] = color
        x += (GLYPH_WIDTH + 1) * scale


def fill(img: np.ndarray, x: int, y: int, w: int, h: int, color: Color) -> None:
    img[max(y, 0) : y + h, max(x, 0) : x + w] = color


def frame(img: np.ndarray, x: int, y: int, w: int, h: int, color: Color, thick: int) -> None:
    fill(img, x, y, w, thick, color)
    fill(img, x, y + h - thick, w, thick, color)
    fill(img, x, y, thick, h, color)
    fill(img, x + w - thick, y, thick, h, color)


def _card_text(card: int) -> tuple[str, str, Color]:
    """(rank text, suit text, ink) of a card."""
    if card >= FIRST_JOKER:
        return "JK", "*", JOKER_INK
    code = CARD_CODES[card]
    return code[:-1], code[-1], SUIT_COLORS[SUITS.index(code[-1])]


def draw_card(
    img: np.ndarray, x: int, y: int, card: int, w: int, h: int, highlight: bool = False
) -> None:
    fill(img, x, y, w, h, CARD_RUN if highlight else CARD_FACE)
    frame(img, x, y, w, h, RUN_EDGE if highlight else CARD_EDGE, BORDER)
    rank, suit, ink = _card_text(card)
    scale = TEXT_SCALE if w >= CARD_WIDTH else 1 + (w >= SMALL_CARD_WIDTH)
    for text, top in ((rank, y + h // 2 - GLYPH_HEIGHT * scale - 1), (suit, y + h // 2 + 3)):
        draw_text(img, x + (w - text_width(text, scale)) // 2 + scale, top, text, ink, scale)


def draw_table(game: Game, penalized: bool = False) -> np.ndarray:
    """The table of ``game`` as an RGB image of shape ``FRAME_SHAPE``, dtype ``uint8``
    (``penalized``: its last action was illegal and penalized, not played)."""
    img = np.full(FRAME_SHAPE, FELT, dtype=np.uint8)
    # Header: title, clock, turn, phase.
    phase = game.phase_name
    if game.iron_count:
        phase += f" ({game.iron_count}/{IRON_APPLICATIONS_PER_TURN} IRON)"
    header = f"COLD IRON  {clock(game.turn)}  TURN {game.turn}/{game.rules.turns}  {phase}"
    draw_text(img, MARGIN, HEADER_Y, header, INK_LIGHT)
    # Status line: Hurt bar, clock bar, deck count.
    draw_text(img, MARGIN, STATUS_Y, "HURT", INK_LIGHT)
    for i in range(MAX_HURT):
        color = HURT_ON if i < game.hurt else HURT_OFF
        fill(img, HURT_X + i * HURT_CELL, STATUS_Y - 1, HURT_CELL - 4, BAR_HEIGHT, color)
    turns = game.rules.turns
    tick = max(1, min(CLOCK_TICK, (DECK_LABEL_X - CLOCK_X - MARGIN) // max(turns, 1)))
    for t in range(turns):
        color = CLOCK_ON if t < game.turn else CLOCK_OFF
        fill(img, CLOCK_X + t * tick, STATUS_Y - 1, max(tick - 2, 1), BAR_HEIGHT, color)
    fill(img, DECK_LABEL_X, STATUS_Y - 3, 16, BAR_HEIGHT + 4, DECK_BACK)
    frame(img, DECK_LABEL_X, STATUS_Y - 3, 16, BAR_HEIGHT + 4, INK_LIGHT, 1)
    draw_text(img, DECK_LABEL_X + 24, STATUS_Y, f"{game.deck_count}", INK_LIGHT)
    # The hand by suit.
    for suit in range(NUM_SUITS):
        y = HAND_Y + suit * ROW_HEIGHT
        field = suit_field(game.hand, suit)
        marked = run_cards(field, suit_field(~(game.hand | game.discarded), suit))
        done = HAS_RUN[field]
        fill(img, 0, y - 2, FRAME_WIDTH, ROW_HEIGHT - 4, FELT_DARK if suit % 2 else FELT)
        label_ink = CLOCK_ON if done else INK_LIGHT
        draw_text(img, MARGIN, y + 12, SUITS[suit], SUIT_COLORS[suit] if not done else label_ink, 3)
        draw_text(img, MARGIN, y + 42, "RUN" if done else SUIT_NAMES[suit], label_ink, 1)
        for r in range(NUM_RANKS):
            x = MARGIN + LABEL_WIDTH + r * (CARD_WIDTH + CARD_GAP)
            if field >> r & 1:
                card = suit * NUM_RANKS + r
                draw_card(img, x, y, card, CARD_WIDTH, CARD_HEIGHT, bool(marked >> r & 1))
            else:  # an empty slot: the rank, dim
                frame(img, x, y, CARD_WIDTH, CARD_HEIGHT, SLOT_EDGE, 1)
                left = x + (CARD_WIDTH - text_width(RANK_CODES[r], 1)) // 2
                draw_text(img, left, y + 27, RANK_CODES[r], INK_DIM, 1)
    # The last action and its draws.
    if game.last_action >= 0:
        label = f"LAST: {ACTION_LABELS[game.last_action]}"
        if penalized:
            label += " - ILLEGAL, PENALIZED"
        elif not game.drawn:
            label += " - NO DRAW"
        elif len(game.drawn) > MAX_SHOWN_DRAWS:
            label += f" - {len(game.drawn)} DRAWN, LAST {MAX_SHOWN_DRAWS} SHOWN"
        draw_text(img, MARGIN, LAST_Y, label, INK_LIGHT)
        for i, card in enumerate(game.drawn[-MAX_SHOWN_DRAWS:]):
            x = MARGIN + i * (SMALL_CARD_WIDTH + SMALL_GAP)
            kept = card < FIRST_COURT and bool(game.hand >> card & 1)
            draw_card(img, x, LAST_Y + 24, card, SMALL_CARD_WIDTH, SMALL_CARD_HEIGHT, kept)
    else:
        draw_text(img, MARGIN, LAST_Y, "A NEW DEAL: 6PM, THE CHANGELING WAITS", INK_DIM)
    # The outcome.
    if game.outcome is not None:
        y = FRAME_HEIGHT - BANNER_HEIGHT
        fill(img, 0, y, FRAME_WIDTH, BANNER_HEIGHT, WON_BANNER if game.won else LOST_BANNER)
        message = "THE BABE IS RESCUED: WON" if game.won else f"LOST: {game.outcome}"
        draw_text(img, (FRAME_WIDTH - text_width(message)) // 2, y + 13, message, INK_LIGHT)
    return img
