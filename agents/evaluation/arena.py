"""Evaluation: every agent plays the same seeded deals; win rates with Wilson intervals.

**Deals (paired comparison).** Deal ``i`` of an evaluation with seed ``S`` and ``N`` episodes
is row ``i`` of ``shuffled_decks(np.random.default_rng(S), N)`` (:func:`deal_decks`), whatever
the agent; each agent is reseeded before deal ``i`` with :func:`agent_seeds`, so its own
randomness (``random``'s) is reproducible and independent of the deal.

**Three ways to play, one result** (identical games, tested): a built-in player on the rules
engine, a trained model's ``batch_policy`` :data:`LOCKSTEP_BATCH` deals at once, any other
agent one env at a time (:func:`~agents.evaluation.lockstep.play_lockstep`'s engines); always
the plain env's default rewards: what is counted is the outcome.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np

from agents.evaluation.lockstep import (
    LOCKSTEP_BATCH,
    BatchPolicy,
    Engine,
    Episode,
    Seat,
    check_env_kwargs,
    play_lockstep,
)
from agents.evaluation.stats import disagreement, mcnemar, p_text, wilson_interval
from agents.players.base import Agent, KnowledgeActor, RuleAware
from coldiron_env.cards import DECK_SIZE, deck_codes
from coldiron_env.dealer import (
    STREAM_INDEX_BITS,
    DealStream,
    check_evaluation_seed,
    shuffled_decks,
    stream_seed,
)
from coldiron_env.game import OUTCOMES
from coldiron_env.observation import OBSERVATION_OPTIONS
from coldiron_env.options import RuleOptions, plain

AGENT_SEED_STREAM: Final = 1  # second word of the seed of the agents' per-deal seeds
MAX_AGENT_SEED: Final = 2**31 - 1

# callback(deal_index, deck_ids_played, outcome, turn_at_end) after each episode
EpisodeCallback = Callable[[int, list[int], str, int], None]


def deal_decks(seed: int, episodes: int) -> np.ndarray:
    """The ``episodes`` decks (card ids, shape (episodes, 54)) of an evaluation with ``seed``
    (an evaluation seed: below 2**32, apart from every training and validation deal)."""
    _check_count(episodes)
    return shuffled_decks(np.random.default_rng(check_evaluation_seed(seed)), episodes)


def validation_decks(
    seed: int, episodes: int, stream: DealStream = DealStream.VALIDATION
) -> np.ndarray:
    """The env's deals on ``reset(seed=stream_seed(stream, seed, k))``, ``k < episodes``: what
    training evaluates on and models are chosen on (another stream's deals with ``stream``)."""
    _check_count(episodes)
    seeds = (stream_seed(stream, seed, k) for k in range(episodes))
    return np.stack([shuffled_decks(np.random.default_rng(s), 1)[0] for s in seeds])


EVALUATION_DEALS: Final = "evaluation"
VALIDATION_DEALS: Final = "validation"
"""The two sets of deals of a seed (:func:`decks_of`), as the commands and records name them."""


def decks_of(seed: int, episodes: int, validation: bool = False) -> np.ndarray:
    """The evaluation deals of ``seed`` (:func:`deal_decks`), or its validation deals."""
    return validation_decks(seed, episodes) if validation else deal_decks(seed, episodes)


def add_deal_flags(parser: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--deals``: the deals every agent plays (``scripts/evaluate.py``,
    ``scripts/ladder.py``; :func:`validation_asked` reads them)."""
    parser.add_argument("--seed", type=int, default=0,
        help="seed of the deals (default %(default)s; docs/environment.md#seeding says which "
        "deals a seed gives)")  # fmt: skip
    parser.add_argument("--deals", choices=(EVALUATION_DEALS, VALIDATION_DEALS),
        default=EVALUATION_DEALS, help="evaluation deals (default; reported results) or "
        "validation deals (what training evaluates on and models are chosen on: "
        "reset(seed=stream_seed(VALIDATION, SEED, k)))")  # fmt: skip


def validation_asked(args: argparse.Namespace) -> bool:
    """Whether :func:`add_deal_flags`' ``--deals`` asks for validation deals; ``ValueError``
    naming ``--seed`` when it deals none."""
    validation = bool(args.deals == VALIDATION_DEALS)
    try:
        decks_of(args.seed, 1, validation)
    except ValueError as err:
        raise ValueError(f"--seed {args.seed}: {err}") from None
    return validation


def agent_seeds(seed: int, episodes: int) -> list[int]:
    """The seed each agent is reset with before each deal (same for every agent)."""
    _check_count(episodes)
    rng = np.random.default_rng([seed, AGENT_SEED_STREAM])
    return rng.integers(0, MAX_AGENT_SEED, size=episodes).tolist()  # type: ignore[no-any-return]


MAX_EPISODES: Final = 1 << STREAM_INDEX_BITS  # a seed's validation deals (16,777,216)


def _check_count(episodes: int) -> None:
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes <= 0:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
    if episodes > MAX_EPISODES:
        raise ValueError(f"episodes must be at most {MAX_EPISODES:,} (a seed's), got {episodes:,}")


# an agent's play, a planner's, an agent again on a planner's first deals (a paired baseline),
# or a bound of the lab's (lab/ladder_rows.py)
ResultKind = Literal["agent", "planner", "baseline-subset", "bound"]


@dataclass
class AgentResult:
    """One agent's results over the deals of an evaluation (a row of a table or of the ladder)."""

    agent: str
    episodes: int = 0
    # games per outcome (a bound tallies the solver's verdicts instead)
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    total_turns: int = 0
    total_steps: int = 0  # decisions taken, over all games
    seconds: float = 0.0
    kind: ResultKind = "agent"
    won: list[bool] = field(default_factory=list, repr=False)  # per deal (a bound's: may be)
    note: str = ""  # a remark reported with the result (the ladder's JSON has it)
    games: list[Episode] = field(default_factory=list, repr=False)  # per deal, when kept
    decisions: list[list[Any]] = field(default_factory=list, repr=False)
    """Per deal, when kept, a searching player's planned decisions (its ``decisions`` records)."""

    @property
    def wins(self) -> int:
        """Deals won; for a ``bound``, deals that may be won (its per-deal ``won``)."""
        return sum(self.won) if self.kind == "bound" else self.outcomes["won"]

    @property
    def win_rate(self) -> float:
        return self.wins / self.episodes if self.episodes else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.wins, self.episodes)

    @property
    def mean_turns(self) -> float:
        return self.total_turns / self.episodes if self.episodes else math.nan

    @property
    def mean_steps(self) -> float:
        """Decisions per game."""
        return self.total_steps / self.episodes if self.episodes else math.nan

    @property
    def seconds_per_decision(self) -> float:
        return self.seconds / self.total_steps if self.total_steps else math.nan

    @property
    def interval_text(self) -> str:
        """The 95% interval in percent: ``[1.23%, 4.56%]``."""
        low, high = self.interval
        return f"[{100 * low:.2f}%, {100 * high:.2f}%]"

    def add(self, outcome: str, turns: int, steps: int) -> None:
        """Count the next deal's game."""
        self.episodes += 1
        self.outcomes[outcome] += 1
        self.total_turns += turns
        self.total_steps += steps
        self.won.append(outcome == "won")

    def extend(self, other: AgentResult) -> None:
        """Count the deals of ``other``, which follow this result's (e.g. a worker's share)."""
        self.episodes += other.episodes
        for outcome, count in other.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + count
        self.total_turns += other.total_turns
        self.total_steps += other.total_steps
        self.seconds += other.seconds
        self.won.extend(other.won)

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "agent": self.agent,
            "episodes": self.episodes,
            "wins": self.wins,
            "win_rate": self.win_rate,
            "ci_low": low,
            "ci_high": high,
            "outcomes": dict(self.outcomes),
            "mean_turns": self.mean_turns,
            "mean_steps": self.mean_steps,
            "seconds": self.seconds,
            "won_bits": pack_wins(self.won),
        }


def pack_wins(won: Sequence[bool]) -> str:
    """Per-deal wins as hex (8 deals a byte, deal 0 the high bit): kept in the records so that
    any two agents of one record can be paired deal by deal afterwards."""
    return np.packbits(np.asarray(won, dtype=bool)).tobytes().hex()


def check_decks(decks: np.ndarray) -> None:
    """Refuse, naming the deal, decks that are not rows of each card id once."""
    if decks.shape[1:] != (DECK_SIZE,):
        raise ValueError(f"decks must be rows of {DECK_SIZE} card ids, got shape {decks.shape}")
    whole = (np.sort(decks, axis=1) == np.arange(DECK_SIZE)).all(axis=1)
    if not whole.all():
        deal = int(np.flatnonzero(~whole)[0])
        raise ValueError(
            f"deal {deal}: the deck must hold each card id 0..{DECK_SIZE - 1} once, got "
            f"{decks[deal].tolist()}"
        )


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`evaluate_agent`: ``partial`` holds the deals played until then
    (the first ``partial.episodes`` of the deals, in order), so a caller can keep them."""

    def __init__(self, partial: AgentResult) -> None:
        super().__init__(f"{partial.agent}: interrupted after {partial.episodes} deals")
        self.partial = partial

    def __reduce__(self) -> tuple[type[EvaluationInterrupted], tuple[AgentResult]]:
        return type(self), (self.partial,)  # picklable (a worker's), with what it carries


def evaluate_agent(
    agent: Agent,
    decks: np.ndarray,
    seeds: Sequence[int],
    env_kwargs: Mapping[str, Any] | None = None,
    label: str | None = None,
    use_engine: bool | None = None,
    callback: EpisodeCallback | None = None,
    use_batch: bool | None = None,
    keep: bool = False,
) -> AgentResult:
    """Play ``agent`` on every deck of ``decks`` (reset with ``seeds[i]`` before deck ``i``).

    ``use_engine``: on the rules engine (default: for a
    :class:`~agents.players.base.KnowledgeActor`) or through the env (False). ``use_batch``:
    :data:`LOCKSTEP_BATCH` deals at once with the agent's :class:`BatchPolicy` (default: when it has
    one and is not on the engine; deterministic, so the seeds do not apply). ``callback`` is called
    once per deal, in deal order. ``keep``: the result keeps every game (``games``: the deck and
    the actions, which replay it) and, for a player that records its searches (a ``decisions``
    list, as the planner's), each deal's records. Ctrl-C raises :class:`EvaluationInterrupted`,
    carrying the deals finished until then.
    """
    # a trained model's observation options (flat or dict, recall) added; a clash refused
    kwargs = check_env_kwargs(agent_env_kwargs(agent, env_kwargs or {}))
    check_decks(decks)
    if len(seeds) != len(decks):
        raise ValueError(f"got {len(seeds)} agent seeds for {len(decks)} decks")
    if isinstance(agent, RuleAware):
        agent.set_rules(RuleOptions.from_kwargs(kwargs))
    result = AgentResult(label or agent.name)
    if use_engine is None:
        use_engine = not use_batch and isinstance(agent, KnowledgeActor)
    policy = getattr(agent, "batch_policy", None)  # a trained model's
    batch_policy = policy if isinstance(policy, BatchPolicy) else None
    if use_batch is None:
        use_batch = batch_policy is not None and not use_engine
    if use_batch and use_engine:
        raise ValueError(f"agent {result.agent!r}: play on the engine or in batches, not both")
    if use_batch and batch_policy is None:
        raise ValueError(f"agent {result.agent!r} cannot play in batches (no batch_policy)")

    def seat(i: int) -> Agent:
        agent.reset(seed=seeds[i])
        return agent

    players: BatchPolicy | Seat = batch_policy if use_batch and batch_policy is not None else seat
    engine: Engine = "game" if use_engine else "auto"
    rows = decks.tolist()  # the rules engine takes card ids, an env codes
    resets = [{"options": {"deck": row if use_engine else deck_codes(row)}} for row in rows]
    batch = LOCKSTEP_BATCH if use_batch else 1
    searched = keep and hasattr(agent, "decisions")  # one game at a time: a player that searches
    begins: list[int] = []
    if searched:
        agent.decisions = []  # type: ignore[attr-defined]

    def begin(_game: int, _obs: Any, _info: dict[str, Any]) -> None:
        begins.append(len(agent.decisions))  # type: ignore[attr-defined]

    start = time.perf_counter()
    try:
        played = play_lockstep(
            players, kwargs, resets, batch, engine, on_start=begin if searched else None
        )
        if keep:
            result.games = played
        if searched:
            records = agent.decisions  # type: ignore[attr-defined]
            ends = [*begins[1:], len(records)]
            result.decisions = [records[a:b] for a, b in zip(begins, ends, strict=True)]
        for i, episode in enumerate(played):
            result.add(episode.outcome, episode.turn, episode.steps)
            if callback is not None:
                callback(i, list(episode.deck), episode.outcome, episode.turn)
    except KeyboardInterrupt as stop:
        raise EvaluationInterrupted(result) from stop
    finally:
        result.seconds = time.perf_counter() - start
    return result


def agent_env_kwargs(agent: Agent, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluation's env options with the observation options the agent carries (a trained
    model's ``env_kwargs``) added; one the evaluation sets otherwise is refused by name: a
    network plays only on the observation it was trained on."""
    out = dict(env_kwargs)
    own = getattr(agent, "env_kwargs", None)
    if isinstance(own, Mapping):
        carried = {k: own[k] for k in OBSERVATION_OPTIONS if k in own}
        clash = {k: v for k, v in carried.items() if k in out and plain(out[k]) != v}
        if clash:
            asked = ", ".join(f"{k}={out[k]!r}" for k in clash)
            kept = ", ".join(f"{k}={v!r}" for k, v in clash.items())
            raise ValueError(
                f"{getattr(agent, 'name', 'agent')} plays on the observation it was trained on "
                f"({kept}), not {asked}: leave the observation options to the models"
            )
        out.update(carried)
    return out


def evaluate(
    agents: Sequence[tuple[str, Agent]],
    episodes: int,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: Callable[[AgentResult], None] | None = None,
    *,
    validation: bool = False,
    keep: bool = False,
) -> list[AgentResult]:
    """Evaluate each ``(label, agent)`` on the same ``episodes`` deals from ``seed``
    (evaluation deals, or with ``validation`` the validation deals of that seed); ``keep``: the
    results keep the games (:func:`evaluate_agent`)."""
    base = check_env_kwargs(env_kwargs or {})
    decks = decks_of(seed, episodes, validation)
    seeds = agent_seeds(seed, episodes)
    results = []
    for label, agent in agents:
        result = evaluate_agent(agent, decks, seeds, base, label=label, keep=keep)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def paired_lines(results: Sequence[AgentResult], against: str) -> list[dict[str, Any]]:
    """Each agent against ``against`` on the same deals: difference and McNemar test."""
    base = next((r for r in results if r.agent == against), None)
    if base is None:
        return []
    return [
        {"agent": r.agent, "against": against, **mcnemar(base.won, r.won)}
        for r in results
        if r is not base
    ]


def format_paired(pairs: list[dict[str, Any]]) -> str:
    """The paired comparisons as text lines ("" when there are none)."""
    if not pairs:
        return ""
    lines = [
        f"\npaired with {pairs[0]['against']} on the same deals (difference, 95%; deals only one "
        f"won: only_other_wins by the agent, only_base_wins by {pairs[0]['against']}; McNemar):"
    ]
    for p in pairs:
        low, high = p["difference_ci95"]
        lines.append(
            f"  {p['agent']}: {100 * p['difference']:+.2f} points [{100 * low:+.2f}, "
            f"{100 * high:+.2f}]; only_other_wins {p['only_other_wins']}, only_base_wins "
            f"{p['only_base_wins']}; p = {p_text(p['p_two_sided'])}" + disagreement(p)
        )
    return "\n".join(lines)


def report(
    results: Sequence[AgentResult],
    episodes: int,
    seed: int,
    env_kwargs: Mapping[str, Any],
    validation: bool = False,
) -> dict[str, Any]:
    """The JSON document of an evaluation (on the validation deals with ``validation``)."""
    dealt = (
        "the env's deal on reset(seed=coldiron_env.dealer.stream_seed(DealStream.VALIDATION, "
        "seed, i)) for deal i"
        if validation
        else "row i of coldiron_env.dealer.shuffled_decks(numpy.random.default_rng(seed), episodes)"
    )
    return {
        "agents": [r.to_dict() for r in results],
        "episodes": episodes,
        "seed": seed,
        "env_kwargs": dict(env_kwargs),
        "deals": f"{dealt}, identical for every agent",
        "interval": "Wilson score, 95% (z = 1.96)",
    }


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table (``| a | b |`` lines, ``| --- |`` under the header), ending in a newline."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def format_table(results: Sequence[AgentResult]) -> str:
    """A plain-text table: win rate with its 95% interval, outcomes, mean turns, time."""
    headers = ["agent", "episodes", "win rate", "95% CI", *OUTCOMES, "mean turns", "seconds"]
    rows = [
        [r.agent, str(r.episodes), f"{100 * r.win_rate:.2f}%", r.interval_text,
         *(str(r.outcomes[o]) for o in OUTCOMES), f"{r.mean_turns:.2f}", f"{r.seconds:.1f}"]
        for r in results
    ]  # fmt: skip
    return text_table(headers, rows)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, a rule of dashes under the header."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in lines)
