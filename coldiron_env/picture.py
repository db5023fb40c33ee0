"""Picture of the table for ``render_mode="rgb_array"``, drawn with NumPy alone.

:func:`draw_table` returns a fixed-size ``(FRAME_HEIGHT, FRAME_WIDTH, 3)``
``uint8`` image: the clock and turn, the Hurt bar, the deck count, the hand laid
out by suit (one row per suit, one slot per rank, run cards highlighted as in
the text view via :func:`coldiron_env.judge.run_cards`), the last action and the
cards it drew, and the outcome when the game is over. Text uses a small
embedded 5x7 bitmap font, so no imaging library is needed.
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

# 5x7 glyphs, one int per row, bit 4 = leftmost pixel.
_FONT_ROWS: Final[dict[str, tuple[int, ...]]] = {
    "0": (0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E),
    "1": (0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "2": (0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F),
    "3": (0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E),
    "4": (0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02),
    "5": (0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E),
    "6": (0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E),
    "7": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08),
    "8": (0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E),
    "9": (0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C),
    "A": (0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11),
    "B": (0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E),
    "C": (0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E),
    "D": (0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C),
    "E": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F),
    "F": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10),
    "G": (0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F),
    "H": (0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11),
    "I": (0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "J": (0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C),
    "K": (0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11),
    "L": (0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F),
    "M": (0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11),
    "N": (0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11),
    "O": (0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E),
    "P": (0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10),
    "Q": (0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D),
    "R": (0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11),
    "S": (0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E),
    "T": (0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04),
    "U": (0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E),
    "V": (0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04),
    "W": (0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A),
    "X": (0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11),
    "Y": (0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04),
    "Z": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F),
    " ": (0, 0, 0, 0, 0, 0, 0),
    ":": (0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0),
    "/": (0, 0x01, 0x02, 0x04, 0x08, 0x10, 0),
    "-": (0, 0, 0, 0x1F, 0, 0, 0),
    ".": (0, 0, 0, 0, 0, 0x0C, 0x0C),
    ",": (0, 0, 0, 0, 0x0C, 0x04, 0x08),
    ";": (0, 0x0C, 0x0C, 0, 0x0C, 0x04, 0x08),
    "(": (0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02),
    ")": (0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08),
    "#": (0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A),
    "*": (0, 0x04, 0x15, 0x0E, 0x15, 0x04, 0),
    "+": (0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0),
    "%": (0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03),
    "?": (0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04),
    "!": (0x04, 0x04, 0x04, 0x04, 0x04, 0, 0x04),
    "_": (0, 0, 0, 0, 0, 0, 0x1F),
}
_COLUMN_BITS: Final = np.array([1 << (GLYPH_WIDTH - 1 - c) for c in range(GLYPH_WIDTH)])
FONT: Final[dict[str, np.ndarray]] = {
    ch: (np.array(rows)[:, None] & _COLUMN_BITS) != 0 for ch, rows in _FONT_ROWS.items()
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
            region = img[y:y1, x:x1]
            region[big[: y1 - y, : x1 - x]] = color
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
    glyph_h = GLYPH_HEIGHT * scale
    draw_text(
        img,
        x + (w - text_width(rank, scale)) // 2 + scale,
        y + h // 2 - glyph_h - 1,
        rank,
        ink,
        scale,
    )
    draw_text(img, x + (w - text_width(suit, scale)) // 2 + scale, y + h // 2 + 3, suit, ink, scale)


def draw_table(game: Game, penalized: bool = False) -> np.ndarray:
    """The table of ``game`` as an RGB image of shape ``FRAME_SHAPE``, dtype ``uint8``
    (``penalized``: its last action was illegal and penalized, not played)."""
    img = np.empty(FRAME_SHAPE, dtype=np.uint8)
    img[:] = FELT
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
            else:
                frame(img, x, y, CARD_WIDTH, CARD_HEIGHT, SLOT_EDGE, 1)
                rank = RANK_CODES[r]
                draw_text(
                    img, x + (CARD_WIDTH - text_width(rank, 1)) // 2, y + 27, rank, INK_DIM, 1
                )
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
        shown = game.drawn[-MAX_SHOWN_DRAWS:]
        for i, card in enumerate(shown):
            x = MARGIN + i * (SMALL_CARD_WIDTH + SMALL_GAP)
            kept = card < FIRST_COURT and bool(game.hand >> card & 1)
            draw_card(img, x, LAST_Y + 24, card, SMALL_CARD_WIDTH, SMALL_CARD_HEIGHT, kept)
    else:
        draw_text(img, MARGIN, LAST_Y, "A NEW DEAL: 6PM, THE CHANGELING WAITS", INK_DIM)
    # The outcome.
    if game.outcome is not None:
        banner = WON_BANNER if game.won else LOST_BANNER
        y = FRAME_HEIGHT - BANNER_HEIGHT
        fill(img, 0, y, FRAME_WIDTH, BANNER_HEIGHT, banner)
        message = "THE BABE IS RESCUED: WON" if game.won else f"LOST: {game.outcome}"
        draw_text(img, (FRAME_WIDTH - text_width(message)) // 2, y + 13, message, INK_LIGHT)
    return img
