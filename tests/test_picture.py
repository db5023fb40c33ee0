"""The rgb_array picture of the table."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from coldiron_env.actions import IRON, STOP, THREATEN
from coldiron_env.cards import CARD_CODES, DECK_SIZE, NUM_SUITS, numbered_id
from coldiron_env.game import Game
from coldiron_env.picture import FONT, FRAME_SHAPE, draw_table, draw_text

RUN_TOP = [numbered_id(s, r) for s in range(NUM_SUITS) for r in (1, 2, 3)]
DECK = RUN_TOP + [c for c in range(DECK_SIZE) if c not in RUN_TOP]


def test_frame_shape_and_dtype() -> None:
    img = draw_table(Game(DECK))
    assert img.shape == FRAME_SHAPE
    assert img.dtype == np.uint8
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 5  # not a blank frame


def test_image_changes_with_the_state() -> None:
    game = Game(DECK)
    frames = [draw_table(game)]
    for action in (THREATEN, IRON, IRON, STOP):
        game.step(action)
        frames.append(draw_table(game))
    for before, after in itertools.pairwise(frames):
        assert not np.array_equal(before, after)
    # Same state, same picture.
    assert np.array_equal(draw_table(game), draw_table(game.clone()))


def test_hurt_and_hand_regions_react() -> None:
    game = Game(DECK)
    calm = draw_table(game)
    game.hurt = 4
    hurt = draw_table(game)
    diff = np.argwhere((calm != hurt).any(axis=2))
    assert diff[:, 0].max() < 72  # only the status line changed
    game.hand |= 1 << numbered_id(3, 10)
    held = draw_table(game)
    rows = np.argwhere((hurt != held).any(axis=2))[:, 0]
    assert rows.min() > 72  # only the hand changed


def test_won_game_shows_banner() -> None:
    game = Game(DECK)
    for _ in range(12):
        game.step(THREATEN)
    assert game.won
    img = draw_table(game)
    assert (img[-5, 5] != img[100, 2]).any()  # banner colour differs from the felt


def test_text_is_drawn_and_clipped() -> None:
    img = np.zeros((20, 30, 3), dtype=np.uint8)
    draw_text(img, 0, 0, "ab~", (255, 255, 255), scale=1)
    assert img.any()
    draw_text(img, 25, 15, "WWWW", (1, 2, 3), scale=3)  # clipped, no error
    assert set(FONT) >= set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ:/-.")


def test_record_video_records_a_real_episode_of_the_real_env(tmp_path: Path) -> None:
    """Gymnasium's RecordVideo on ``gym.make("coldiron/ColdIron-v0", render_mode="rgb_array")``
    (moviepy is in the dev extra): the file decodes to one frame per state of the episode,
    each the env's picture of the table."""
    import gymnasium as gym
    from moviepy import VideoFileClip

    import coldiron_env  # noqa: F401  (registers the id)

    env = gym.wrappers.RecordVideo(
        gym.make("coldiron/ColdIron-v0", render_mode="rgb_array"),
        str(tmp_path / "video"),
        disable_logger=True,
    )
    _, info = env.reset(seed=0, options={"deck": [CARD_CODES[c] for c in DECK]})
    frames = [env.render()]
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step(np.int64(THREATEN))
        frames.append(env.render())
    env.close()  # type: ignore[no-untyped-call]
    assert info["outcome"] == "won"
    (video,) = (tmp_path / "video").glob("*.mp4")
    clip = VideoFileClip(str(video))
    try:
        decoded = list(clip.iter_frames())
        assert (clip.h, clip.w) == FRAME_SHAPE[:2]
        assert len(decoded) == len(frames) == 13  # the dealt state, then 12 Threatens
        first, last = decoded[0].astype(int), decoded[-1].astype(int)
        assert np.abs(first - frames[0]).mean() < 8  # lossy, but the same picture
        assert np.abs(last - frames[-1]).mean() < 8
        assert np.abs(first - last).mean() > 1  # and the episode moved
    finally:
        clip.close()
