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

from coldiron_env.actions import BONUS, IRON, NUM_ACTIONS, RACK_ACTIONS, REST, STOP, THREATEN
from coldiron_env.batched import compiled
from coldiron_env.cards import DECK_SIZE, FIRST_COURT, FIRST_JOKER, NUM_NUMBERED, NUM_SUITS
from coldiron_env.dealer import DealStream, shuffled_decks, stream_seed
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS
from lab.bound import (
    CTX_BONUS,
    CTX_TURN,
    FEATURES_PER_STATE,
    HAS_RUN_ARRAY,
    MLP_HIDDEN,
    MLP_SIZE,
    NUM_PARAMS,
    RACK_MASKS,
    ValueModel,
    _tables,
    state_features,
    value,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

FIT_SEED: Final = 900
"""Seed of the fitting deals in the ``SEARCH`` stream (no report or choice uses them)."""
NUM_ACTIONS_RELAXED: Final = NUM_ACTIONS
ACTION_THREATEN, ACTION_IRON, ACTION_REST, ACTION_STOP, ACTION_BONUS = (
    THREATEN,
    IRON,
    REST,
    STOP,
    BONUS,
)
RACK_FIRST: Final = RACK_ACTIONS[0]
NO_VALUE: Final = -1.0


@compiled
def _complete(hand: int) -> bool:
    for s in range(NUM_SUITS):
        if not HAS_RUN_ARRAY[(hand >> (s * 10)) & 1023]:
            return False
    return True


@compiled
def _w(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    ctx: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    """``W`` at a decision point (turn ``turn`` in progress)."""
    deck = _popcount(unseen) + courts + jokers
    return value(
        hand,
        unseen,
        deck,
        courts,
        jokers,
        STANDARD_TURNS - turn + 1,
        hurt,
        theta,
        phi,
        need_t,
        scratch,
        ctx,
    )


@compiled
def _popcount(x: int) -> int:
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@compiled
def _next_turn(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    if turn >= STANDARD_TURNS:
        return 0.0
    return _w(hand, unseen, courts, jokers, turn + 1, hurt, CTX_TURN, theta, phi, need_t, scratch)


@compiled
def _after_iron(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    apps: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    if apps >= IRON_APPLICATIONS_PER_TURN:
        return _next_turn(hand, unseen, courts, jokers, turn, hurt, theta, phi, need_t, scratch)
    return _w(
        hand, unseen, courts, jokers, turn, hurt, CTX_TURN + apps, theta, phi, need_t, scratch
    )


@compiled
def _card_list(unseen: int, courts: int, jokers: int) -> I64:
    deck = _popcount(unseen) + courts + jokers
    out = np.empty(deck, dtype=np.int64)
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


@compiled
def _one_card(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    action: int,
    apps: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    """E[W(next decision)] for Threaten, Rest or the ``apps``-th Iron application."""
    cards = _card_list(unseen, courts, jokers)
    total = 0.0
    for card in cards:
        h, u, k, j = hand, unseen, courts, jokers
        if card < FIRST_COURT:
            h = hand | (1 << card)
            u = unseen & ~(1 << card)
        elif card < FIRST_JOKER:
            k -= 1
        else:
            j -= 1
        if _complete(h):
            total += 1.0
            continue
        if u == 0 and k == 0 and j == 0:
            continue  # deck exhausted
        if action == ACTION_IRON:
            if hurt + 1 >= MAX_HURT:
                continue
            if card >= FIRST_JOKER:
                total += _w(
                    h, u, k, j, turn, hurt + 1, CTX_BONUS + apps, theta, phi, need_t, scratch
                )
            else:
                total += _after_iron(h, u, k, j, turn, hurt + 1, apps, theta, phi, need_t, scratch)
        elif action == ACTION_REST:
            total += _next_turn(h, u, k, j, turn, max(hurt - 1, 0), theta, phi, need_t, scratch)
        elif card >= FIRST_JOKER:
            total += _w(h, u, k, j, turn, hurt, CTX_BONUS, theta, phi, need_t, scratch)
        else:
            total += _next_turn(h, u, k, j, turn, hurt, theta, phi, need_t, scratch)
    return total / cards.shape[0]


@compiled
def _sampled(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    action: int,
    ctx: int,
    samples: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    """E[W(next decision)] of a rack (``action`` 2..15) or a bonus (``ctx``), over
    ``samples`` random orders of the unseen cards."""
    cards = _card_list(unseen, courts, jokers)
    total = 0.0
    for _ in range(samples):
        order = np.random.permutation(cards)
        h, u, k, j, hu = hand, unseen, courts, jokers, hurt
        result = NO_VALUE
        if action == ACTION_BONUS:
            hurting = ctx > CTX_BONUS
            for i in range(min(3, order.shape[0])):
                card = order[i]
                if card < FIRST_COURT:
                    h |= 1 << card
                    u &= ~(1 << card)
                elif card < FIRST_JOKER:
                    k -= 1
                    if hurting:
                        hu += 1
                else:
                    j -= 1
                if _complete(h):
                    result = 1.0
                    break
                if u == 0 and k == 0 and j == 0:
                    result = 0.0
                    break
                if hu >= MAX_HURT:
                    result = 0.0
                    break
            if result == NO_VALUE:
                if hurting:
                    result = _after_iron(
                        h, u, k, j, turn, hu, ctx - CTX_BONUS, theta, phi, need_t, scratch
                    )
                else:
                    result = _next_turn(h, u, k, j, turn, hu, theta, phi, need_t, scratch)
        else:
            targets = RACK_MASKS[action - RACK_FIRST]
            for i in range(order.shape[0]):
                card = order[i]
                if card < FIRST_COURT:
                    h |= 1 << card
                    u &= ~(1 << card)
                elif card < FIRST_JOKER:
                    k -= 1
                    hu += 1
                else:
                    result = 0.0  # slain
                    break
                if _complete(h):
                    result = 1.0
                    break
                if u == 0 and k == 0 and j == 0:
                    result = 0.0
                    break
                if hu >= MAX_HURT:
                    result = 0.0
                    break
                if card < FIRST_COURT and (targets >> card) & 1:
                    result = _next_turn(h, u, k, j, turn, hu, theta, phi, need_t, scratch)
                    break
            if result == NO_VALUE:
                result = 0.0
        total += result
    return total / samples


@compiled
def q_values(
    hand: int,
    unseen: int,
    courts: int,
    jokers: int,
    turn: int,
    hurt: int,
    ctx: int,
    samples: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> F64:
    """E[W(next decision)] of every legal action (``NO_VALUE`` for the others)."""
    q = np.full(NUM_ACTIONS_RELAXED, NO_VALUE)
    if ctx == CTX_TURN:
        q[ACTION_THREATEN] = _one_card(
            hand,
            unseen,
            courts,
            jokers,
            turn,
            hurt,
            ACTION_THREATEN,
            0,
            theta,
            phi,
            need_t,
            scratch,
        )
        q[ACTION_IRON] = _one_card(
            hand, unseen, courts, jokers, turn, hurt, ACTION_IRON, 1, theta, phi, need_t, scratch
        )
        q[ACTION_REST] = _one_card(
            hand, unseen, courts, jokers, turn, hurt, ACTION_REST, 0, theta, phi, need_t, scratch
        )
        for a in range(RACK_FIRST, RACK_FIRST + RACK_MASKS.shape[0]):
            q[a] = _sampled(
                hand,
                unseen,
                courts,
                jokers,
                turn,
                hurt,
                a,
                ctx,
                samples,
                theta,
                phi,
                need_t,
                scratch,
            )
    elif ctx < CTX_BONUS:
        q[ACTION_IRON] = _one_card(
            hand,
            unseen,
            courts,
            jokers,
            turn,
            hurt,
            ACTION_IRON,
            ctx + 1,
            theta,
            phi,
            need_t,
            scratch,
        )
        q[ACTION_STOP] = _next_turn(
            hand, unseen, courts, jokers, turn, hurt, theta, phi, need_t, scratch
        )
    else:
        if ctx == CTX_BONUS:
            q[ACTION_STOP] = _next_turn(
                hand, unseen, courts, jokers, turn, hurt, theta, phi, need_t, scratch
            )
        else:
            q[ACTION_STOP] = _after_iron(
                hand,
                unseen,
                courts,
                jokers,
                turn,
                hurt,
                ctx - CTX_BONUS,
                theta,
                phi,
                need_t,
                scratch,
            )
        q[ACTION_BONUS] = _sampled(
            hand,
            unseen,
            courts,
            jokers,
            turn,
            hurt,
            ACTION_BONUS,
            ctx,
            samples,
            theta,
            phi,
            need_t,
            scratch,
        )
    return q


@compiled
def collect(
    decks: I64,
    theta: F64,
    phi: I64,
    need_t: I64,
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
    Bellman target (the best action by one set of sampled orders, valued with another, so
    that the max of noisy estimates is not biased up), or with ``monte_carlo`` the game's
    result. Returns the number of decision points written (at most ``len(targets)``);
    ``stats`` gets the games played and won."""
    np.random.seed(seed)
    scratch = np.zeros(FEATURES_PER_STATE, dtype=np.int64)
    n = 0
    for g in range(decks.shape[0]):
        first = n
        deck = decks[g]
        pos, hand, hurt, turn, ctx = 0, 0, 0, 1, CTX_TURN
        unseen = 0
        courts = 0
        jokers = 0
        for c in deck:
            if c < FIRST_COURT:
                unseen |= 1 << c
            elif c < FIRST_JOKER:
                courts += 1
            else:
                jokers += 1
        won = False
        while True:
            q = q_values(
                hand, unseen, courts, jokers, turn, hurt, ctx, samples, theta, phi, need_t, scratch
            )
            legal = np.flatnonzero(q > NO_VALUE)
            if n < targets.shape[0]:
                status = state_features(
                    hand,
                    unseen,
                    DECK_SIZE - pos,
                    courts,
                    jokers,
                    STANDARD_TURNS - turn + 1,
                    hurt,
                    ctx,
                    phi,
                    need_t,
                    scratch,
                )
                if status == 0:
                    features[n, :] = scratch
                    if not monte_carlo:
                        check = q_values(
                            hand,
                            unseen,
                            courts,
                            jokers,
                            turn,
                            hurt,
                            ctx,
                            samples,
                            theta,
                            phi,
                            need_t,
                            scratch,
                        )
                        targets[n] = check[legal[np.argmax(q[legal])]]
                    n += 1
            if np.random.random() < epsilon:
                action = legal[np.random.randint(legal.shape[0])]
            else:
                action = legal[np.argmax(q[legal])]
            # play it on the deck
            over = False
            if action == ACTION_STOP:
                if ctx == CTX_BONUS or ctx < CTX_BONUS:
                    if turn >= STANDARD_TURNS:
                        over = True
                    else:
                        turn, ctx = turn + 1, CTX_TURN
                else:
                    apps = ctx - CTX_BONUS
                    if apps >= IRON_APPLICATIONS_PER_TURN:
                        if turn >= STANDARD_TURNS:
                            over = True
                        else:
                            turn, ctx = turn + 1, CTX_TURN
                    else:
                        ctx = CTX_TURN + apps
            else:
                draws = 1
                hurting = False
                rack = -1
                if action == ACTION_BONUS:
                    draws = 3
                    hurting = ctx > CTX_BONUS
                elif RACK_FIRST <= action < ACTION_REST:
                    draws = DECK_SIZE
                    hurting = True
                    rack = action - RACK_FIRST
                apps = ctx if ctx < CTX_BONUS else 0
                next_ctx = -1
                for _ in range(draws):
                    card = deck[pos]
                    pos += 1
                    if card < FIRST_COURT:
                        hand |= 1 << card
                        unseen &= ~(1 << card)
                    elif card < FIRST_JOKER:
                        courts -= 1
                        if hurting:
                            hurt += 1
                    else:
                        jokers -= 1
                        if rack >= 0:
                            over = True
                            break
                    if _complete(hand):
                        won = True
                        over = True
                        break
                    if pos >= DECK_SIZE or hurt >= MAX_HURT:
                        over = True
                        break
                    if action == ACTION_IRON:
                        hurt += 1
                        if hurt >= MAX_HURT:
                            over = True
                            break
                        if card >= FIRST_JOKER:
                            next_ctx = CTX_BONUS + apps + 1
                        elif apps + 1 >= IRON_APPLICATIONS_PER_TURN:
                            next_ctx = -1
                        else:
                            next_ctx = CTX_TURN + apps + 1
                    elif action == ACTION_THREATEN and card >= FIRST_JOKER:
                        next_ctx = CTX_BONUS
                    if rack >= 0 and card < FIRST_COURT and (RACK_MASKS[rack] >> card) & 1:
                        break
                if action == ACTION_REST:
                    hurt = max(hurt - 1, 0)
                if action == ACTION_BONUS and ctx > CTX_BONUS:
                    apps = ctx - CTX_BONUS
                    next_ctx = -1 if apps >= IRON_APPLICATIONS_PER_TURN else CTX_TURN + apps
                if not over:
                    if next_ctx >= 0:
                        ctx = next_ctx
                    elif turn >= STANDARD_TURNS:
                        over = True
                    else:
                        turn, ctx = turn + 1, CTX_TURN
            if over:
                break
        if monte_carlo:
            for i in range(first, n):
                targets[i] = 1.0 if won else 0.0
        stats[0] += 1
        stats[1] += int(won)
    return n


@compiled
def bellman_targets(
    states: I64,
    theta: F64,
    phi: I64,
    need_t: I64,
    samples: int,
    seed: int,
    features: I64,
    targets: F64,
) -> int:
    """Features and double-sampled Bellman targets of relaxed decision points ``states``
    (rows: hand, unseen, courts, jokers, turn, hurt, ctx)."""
    np.random.seed(seed)
    scratch = np.zeros(FEATURES_PER_STATE, dtype=np.int64)
    n = 0
    for i in range(states.shape[0]):
        hand, unseen, courts, jokers, turn, hurt, ctx = states[i]
        deck = _popcount(unseen) + courts + jokers
        status = state_features(
            hand,
            unseen,
            deck,
            courts,
            jokers,
            STANDARD_TURNS - turn + 1,
            hurt,
            ctx,
            phi,
            need_t,
            scratch,
        )
        if status != 0:
            continue
        features[n, :] = scratch
        q = q_values(
            hand, unseen, courts, jokers, turn, hurt, ctx, samples, theta, phi, need_t, scratch
        )
        legal = np.flatnonzero(q > NO_VALUE)
        check = q_values(
            hand, unseen, courts, jokers, turn, hurt, ctx, samples, theta, phi, need_t, scratch
        )
        targets[n] = check[legal[np.argmax(q[legal])]]
        n += 1
    return n


def clairvoyant_states(decks: I64, model: ValueModel) -> tuple[I64, float]:
    """The decision points of the clairvoyant's best relaxed game on each deck (as rows for
    :func:`bellman_targets`), and the mean of the decks' bounds."""
    from lab.bound import DealFacts, deal_bound_path

    rows = []
    values = []
    for deck in decks:
        facts = DealFacts.of(deck)
        value_, path = deal_bound_path(deck, model)
        values.append(value_)
        for pos, turn, hurt, ctx in path:
            rows.append(
                [
                    int(facts.hands[pos]),
                    int(facts.unseen[pos]),
                    int(facts.courts[pos]),
                    int(facts.jokers[pos]),
                    turn,
                    hurt,
                    ctx,
                ]
            )
    return np.asarray(rows, dtype=np.int64).reshape(-1, 7), float(np.mean(values))


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

    phi, need_t = _tables()
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
        n = collect(
            decks,
            theta,
            phi,
            need_t,
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
                theta,
                phi,
                need_t,
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
    phi, need_t = _tables()
    capacity = len(decks) * 80
    features = np.zeros((capacity, FEATURES_PER_STATE), dtype=np.int64)
    targets = np.zeros(capacity)
    stats = np.zeros(2, dtype=np.int64)
    n = collect(
        decks, model.theta, phi, need_t, 0.0, samples, seed, False, features, targets, stats
    )
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
