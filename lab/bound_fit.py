"""Fitting the bound's ``W``: fitted value iteration on the relaxed game.

The bound is tight where ``W`` is close to the best honest win chance of the relaxed game
(:mod:`lab.bound`): where no action is expected to raise it much (the
clairvoyant harvests every expected rise) and where the best action is expected to keep
it. So ``W`` is fitted to Bellman targets, not to a player's outcomes: at positions a
player reaches, ``target = max over actions of E[W(next decision point)]``, the expectation
exact over the next card for one-card actions and sampled over the unseen cards' orders
for racks and bonus draws; the model is fitted to the targets (logistic, cross-entropy with
soft targets), and the positions are played again by the greedy player of the new ``W``
(with some random actions), round after round. Every deal here comes from a stream of its
own (``DealStream.SEARCH``, seed :data:`FIT_SEED`): the bound is then computed on deals
``W`` never saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import IRON, NUM_ACTIONS, REST, STOP, THREATEN
from coldiron_env.batched import compiled_uncached
from coldiron_env.cards import FIRST_COURT, FIRST_JOKER, NUM_NUMBERED
from coldiron_env.dealer import DealStream, shuffled_decks, stream_seed
from coldiron_env.options import STANDARD_TURNS
from lab.bound import (
    FEATURES_PER_STATE,
    MLP_HIDDEN,
    MLP_SIZE,
    NUM_PARAMS,
    At,
    ValueModel,
    WArgs,
    deal_bound_path,
    state_features,
    value,
    w_args,
)
from lab.relaxed import (
    ACTIONS_AT,
    P_COURTS,
    P_CTX,
    P_HAND,
    P_HURT,
    P_JOKERS,
    P_TURN,
    P_UNSEEN,
    PLAYING,
    POSITION_SIZE,
    RELAXED,
    WON,
    DealFacts,
    advance,
    count,
    start_position,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

FIT_SEED: Final = 900
"""Seed of the fitting deals in the ``SEARCH`` stream (no report or choice uses them)."""
NO_VALUE: Final = -1.0
KEEP_ALL: Final = RELAXED.packed()
"""The relaxed game's keeping, as :func:`lab.relaxed.advance` reads it."""


# These read the rules and W of other modules: compiled afresh in each process.
# These read the rules and W of other modules: compiled afresh in each process.
@compiled_uncached
def _at(position: I64) -> At:
    """A decision point as ``W`` reads it."""
    unseen, courts, jokers = position[P_UNSEEN], position[P_COURTS], position[P_JOKERS]
    deck = count(unseen) + courts + jokers
    turns_left = STANDARD_TURNS - position[P_TURN] + 1
    return (position[P_HAND], unseen, deck, courts, jokers, turns_left, position[P_HURT])


@compiled_uncached
def _after(order: I64, start: int, position: I64, action: int, after: I64, w: WArgs) -> float:
    """``W`` once ``action`` is played at ``position`` on the cards ``order[start:]`` (1 won,
    0 lost); ``after`` is scratch."""
    after[:] = position
    outcome, _ = advance(order, start, after, action, KEEP_ALL)
    if outcome == PLAYING:
        return value(_at(after), w, after[P_CTX])
    return 1.0 if outcome == WON else 0.0


@compiled_uncached
def _card_list(position: I64) -> I64:
    unseen, courts, jokers = position[P_UNSEEN], position[P_COURTS], position[P_JOKERS]
    out = np.empty(count(unseen) + courts + jokers, dtype=np.int64)
    k = 0
    for c in range(NUM_NUMBERED):
        if (unseen >> c) & 1:
            out[k] = c
            k += 1
    for i in range(courts):
        out[k] = FIRST_COURT + i
        k += 1
    for i in range(jokers):
        out[k] = FIRST_JOKER + i
        k += 1
    return out


@compiled_uncached
def _one_card(position: I64, action: int, w: WArgs) -> float:
    """E[W(next decision)] of an action that draws one card (Threaten, Rest, the Iron), or
    none (Stop), exact over the unseen cards."""
    after = np.empty_like(position)
    if action == STOP:
        return _after(position, 0, position, action, after, w)
    cards = _card_list(position)
    total = 0.0
    for i in range(cards.shape[0]):
        total += _after(cards, i, position, action, after, w)
    return total / cards.shape[0]


@compiled_uncached
def _sampled(position: I64, action: int, samples: int, w: WArgs) -> float:
    """E[W(next decision)] of a rack or a bonus, over ``samples`` random orders of the
    unseen cards."""
    cards = _card_list(position)
    after = np.empty_like(position)
    total = 0.0
    for _ in range(samples):
        order = np.random.permutation(cards)
        total += _after(order, 0, position, action, after, w)
    return total / samples


@compiled_uncached
def q_values(position: I64, samples: int, w: WArgs) -> F64:
    """E[W(next decision)] of every legal action (``NO_VALUE`` for the others)."""
    q = np.full(NUM_ACTIONS, NO_VALUE)
    actions = ACTIONS_AT[position[P_CTX]]
    for i in range(actions.shape[0]):
        action = actions[i]
        if action < 0:
            break
        if action in (THREATEN, IRON, REST, STOP):
            q[action] = _one_card(position, action, w)
        else:  # a rack or a bonus
            q[action] = _sampled(position, action, samples, w)
    return q


@compiled_uncached
def _features(position: I64, w: WArgs) -> int:
    """The features of a decision point, into ``W``'s scratch
    (:func:`lab.bound.state_features`: 0 where ``W`` is a model's, 1 won, -1 out of reach)."""
    return state_features(_at(position), position[P_CTX], w[1], w[2])


@compiled_uncached
def _bellman(position: I64, q: F64, samples: int, w: WArgs) -> float:
    """The Bellman target: the best action by ``q``, valued with another set of sampled
    orders, so that the max of noisy estimates is not biased up."""
    legal = np.flatnonzero(q > NO_VALUE)
    check = q_values(position, samples, w)
    return float(check[legal[np.argmax(q[legal])]])


@compiled_uncached
def collect(
    decks: I64,
    w: WArgs,
    epsilon: float,
    samples: int,
    seed: int,
    monte_carlo: bool,
    features: I64,
    targets: F64,
    stats: I64,
) -> int:
    """Play the relaxed game on each deck with the greedy player of ``W`` (a random legal
    action with chance ``epsilon``); write every decision point's features and target: its
    Bellman target (:func:`_bellman`), or with ``monte_carlo`` the game's result. Returns
    the number of decision points written (at most ``len(targets)``); ``stats`` gets the
    games played and won."""
    np.random.seed(seed)
    n = 0
    for g in range(decks.shape[0]):
        first = n
        deck = decks[g]
        position = start_position(deck)
        pos = 0
        while True:
            q = q_values(position, samples, w)
            legal = np.flatnonzero(q > NO_VALUE)
            if n < targets.shape[0] and _features(position, w) == 0:
                features[n, :] = w[2]
                if not monte_carlo:
                    targets[n] = _bellman(position, q, samples, w)
                n += 1
            if np.random.random() < epsilon:
                action = legal[np.random.randint(legal.shape[0])]
            else:
                action = legal[np.argmax(q[legal])]
            outcome, drawn = advance(deck, pos, position, action, KEEP_ALL)
            pos += drawn
            if outcome != PLAYING:
                break
        if monte_carlo:
            for i in range(first, n):
                targets[i] = 1.0 if outcome == WON else 0.0
        stats[0] += 1
        stats[1] += int(outcome == WON)
    return n


@compiled_uncached
def bellman_targets(
    states: I64, w: WArgs, samples: int, seed: int, features: I64, targets: F64
) -> int:
    """Features and double-sampled Bellman targets of relaxed decision points ``states``
    (rows: :mod:`lab.relaxed`'s positions)."""
    np.random.seed(seed)
    n = 0
    for i in range(states.shape[0]):
        position = states[i].copy()
        if _features(position, w) != 0:
            continue
        features[n, :] = w[2]
        q = q_values(position, samples, w)
        targets[n] = _bellman(position, q, samples, w)
        n += 1
    return n


def clairvoyant_states(decks: I64, model: ValueModel) -> tuple[I64, float]:
    """The decision points of the clairvoyant's best relaxed game on each deck (as rows for
    :func:`bellman_targets`), and the mean of the decks' bounds."""
    rows = []
    values = []
    for deck in decks:
        facts = DealFacts.of(deck)
        value_, path = deal_bound_path(deck, model)
        values.append(value_)
        for pos, turn, hurt, ctx in path:
            position = np.zeros(POSITION_SIZE, dtype=np.int64)
            position[[P_HAND, P_UNSEEN, P_COURTS, P_JOKERS]] = (
                facts.hands[pos],
                facts.unseen[pos],
                facts.courts[pos],
                facts.jokers[pos],
            )
            position[[P_HURT, P_TURN, P_CTX]] = (hurt, turn, ctx)
            rows.append(position)
    return np.asarray(rows, dtype=np.int64).reshape(-1, POSITION_SIZE), float(np.mean(values))


def fit_decks(count: int, seed: int = FIT_SEED, first: int = 0) -> I64:
    """Deals of the fitting stream (``SEARCH``, seed ``seed``), deal ``first`` onwards."""
    return np.stack(
        [
            shuffled_decks(
                np.random.default_rng(stream_seed(DealStream.SEARCH, seed, first + k)), 1
            )[0]
            for k in range(count)
        ]
    ).astype(np.int64)


@dataclass
class FitSettings:
    rounds: int = 6
    monte_carlo_rounds: int = 2
    """First rounds fitted to the greedy player's game results (a starting point), the
    others to Bellman targets."""
    deals: int = 4000
    """Deals played per round (their decision points are the round's training data)."""
    samples: int = 16
    """Sampled orders per rack or bonus in a Bellman target."""
    epsilon: float = 0.1
    path_deals: int = 100
    """Fitting deals whose clairvoyant's best game (under the current ``W``) adds its decision
    points to the round's data: where the bound harvests ``W``'s errors."""
    path_weight: int = 5
    expectile: float = 0.9
    loss_scale: float = 100.0
    epochs: int = 300
    learning_rate: float = 0.05
    network: bool = False
    """``W`` as a small network over the features (else logistic)."""
    l2: float = 1e-4
    seed: int = FIT_SEED


def _torch_logits(weights: Any, x: Any) -> Any:
    """The logit of ``W`` (logistic or network form, by the size of ``weights``) in torch."""
    import torch

    if weights.shape[0] == NUM_PARAMS:
        return weights[x].sum(dim=1)
    h = MLP_HIDDEN
    embed = weights[: NUM_PARAMS * h].view(NUM_PARAMS, h)
    offset = NUM_PARAMS * h
    b1 = weights[offset : offset + h]
    offset += h
    w2 = weights[offset : offset + h * h].view(h, h)
    b2 = weights[offset + h * h : offset + h * h + h]
    w3 = weights[offset + h * h + h : offset + h * h + 2 * h]
    b3 = weights[offset + h * h + 2 * h]
    first = torch.tanh(embed[x].sum(dim=1) + b1)
    second = torch.tanh(first @ w2.T + b2)
    return second @ w3 + b3


def fit_value_model(
    settings: FitSettings,
    start: ValueModel | None = None,
    log: Callable[[str], None] = print,
) -> ValueModel:
    """Fitted value iteration (module docstring); returns the last round's ``W``."""
    import torch

    if start is not None and start.theta.size:
        theta = start.theta.copy()
    elif settings.network:
        rng = np.random.default_rng(settings.seed)
        theta = rng.normal(0.0, 0.1, MLP_SIZE)
    else:
        theta = np.zeros(NUM_PARAMS)
    history: list[dict[str, Any]] = []
    for r in range(settings.rounds):
        t0 = time.perf_counter()
        decks = fit_decks(settings.deals, settings.seed, r * settings.deals)
        capacity = settings.deals * 80
        features = np.zeros((capacity, FEATURES_PER_STATE), dtype=np.int64)
        targets = np.zeros(capacity)
        stats = np.zeros(2, dtype=np.int64)
        monte_carlo = r < settings.monte_carlo_rounds
        w = w_args(ValueModel(theta))
        n = collect(
            decks,
            w,
            settings.epsilon,
            settings.samples,
            settings.seed * 1000 + r,
            monte_carlo,
            features,
            targets,
            stats,
        )
        path_bound = float("nan")
        if not monte_carlo and settings.path_deals:
            path_decks = fit_decks(settings.path_deals, settings.seed + 1, r * settings.path_deals)
            states, path_bound = clairvoyant_states(path_decks, ValueModel(theta))
            extra_f = np.zeros((len(states), FEATURES_PER_STATE), dtype=np.int64)
            extra_t = np.zeros(len(states))
            m = bellman_targets(
                states,
                w,
                settings.samples,
                settings.seed * 1000 + 500 + r,
                extra_f,
                extra_t,
            )
            features = np.concatenate(
                [features[:n], np.repeat(extra_f[:m], settings.path_weight, 0)]
            )
            targets = np.concatenate([targets[:n], np.repeat(extra_t[:m], settings.path_weight)])
            n = len(targets)
        x = torch.as_tensor(features[:n])
        y = torch.as_tensor(np.clip(targets[:n], 0.0, 1.0))
        weights = torch.nn.Parameter(torch.as_tensor(theta.copy()))
        optimizer = torch.optim.Adam([weights], lr=settings.learning_rate)
        for _ in range(settings.epochs):
            logits = _torch_logits(weights, x)
            fitted_w = torch.sigmoid(logits)
            if monte_carlo:
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
            else:  # an expectile: falling short of a target costs more than exceeding it
                gap = y - fitted_w
                weight = torch.where(gap > 0, settings.expectile, 1.0 - settings.expectile)
                loss = (weight * gap**2).mean() * settings.loss_scale
            loss = loss + settings.l2 * (weights**2).sum()
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        theta = weights.detach().numpy().copy()
        with torch.no_grad():
            fitted = torch.sigmoid(_torch_logits(weights, x)).numpy()
        record = {
            "round": r,
            "targets": "game results" if monte_carlo else "Bellman",
            "player_won": float(stats[1] / max(stats[0], 1)),
            "clairvoyant_paths_bound": path_bound,
            "decision_points": int(n),
            "mean_target": float(y.mean()),
            "mean_fitted": float(fitted.mean()),
            "mean_abs_error": float(np.abs(fitted - y.numpy()).mean()),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        history.append(record)
        log(f"fit round {r + 1}/{settings.rounds}: {record}")
    return ValueModel(
        theta, name="fitted value iteration", meta={"fit": history, "settings": settings.__dict__}
    )


def drift(model: ValueModel, decks: I64, samples: int = 16, seed: int = 1) -> dict[str, float]:
    """``d = max over actions of E[W(next)] - W`` at the decision points the greedy player of
    ``W`` reaches on ``decks``: the rises the clairvoyant can harvest (module docstring)."""
    if model.theta.size == 0:
        return {
            "decision_points": 0.0,
            "mean_drift": 0.0,
            "mean_positive_drift": 0.0,
            "share_positive": 0.0,
        }
    capacity = len(decks) * 80
    features = np.zeros((capacity, FEATURES_PER_STATE), dtype=np.int64)
    targets = np.zeros(capacity)
    stats = np.zeros(2, dtype=np.int64)
    n = collect(decks, w_args(model), 0.0, samples, seed, False, features, targets, stats)
    import torch

    with torch.no_grad():
        current = torch.sigmoid(
            _torch_logits(torch.as_tensor(model.theta), torch.as_tensor(features[:n]))
        ).numpy()
    d = targets[:n] - current
    return {
        "decision_points": float(n),
        "mean_drift": float(d.mean()),
        "mean_positive_drift": float(np.maximum(d, 0).mean()),
        "share_positive": float((d > 0).mean()),
    }
