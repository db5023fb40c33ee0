"""Evaluate agents on the same seeded deals of Cold Iron: win rates with Wilson 95% intervals.

    .venv/bin/python scripts/evaluate.py --agent heuristic --agent threaten --agent runs/ppo \\
        --episodes 20000 --json eval.json --plot eval.png

An agent is a name (a built-in player such as heuristic or planner, a shipped model such as
distilled, a search such as strongest: the list under --agent), a run directory, a ``.zip``
or ``.onnx`` model; a ``train.py --seeds`` output folder stands for its ``seed-N`` runs, also
reported together: the mean of their win rates with a Student-t 95% interval across seeds.

Every agent plays the same deals: deal i is row i of
``shuffled_decks(numpy.random.default_rng(SEED), EPISODES)`` (with ``--deals validation``,
the env's deal on ``reset(seed=stream_seed(VALIDATION, SEED, i))``). Evaluation uses the
plain env (default rewards, no shaping); what is counted is the outcome.

Ctrl-C reports the agents that finished and keeps the deals the interrupted one had played
(``--json``: its ``interrupted_agent``, the first deals in order), exiting 130.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from pathlib import Path
from typing import Any

from agents.atomic import atomic_write_json, check_writable
from agents.cli import EXIT_ERROR, EXIT_INTERRUPTED, command_parser, refuse
from agents.evaluation import plots
from agents.evaluation.arena import (
    MAX_EPISODES,
    AgentResult,
    add_deal_flags,
    agent_env_kwargs,
    evaluate,
    format_paired,
    format_table,
    paired_lines,
    report,
    validation_asked,
)
from agents.evaluation.lockstep import EVAL_ENV_KWARGS, check_env_kwargs
from agents.gitinfo import code_stamp
from agents.learning.multiseed import (
    expand_seed_root,
    format_aggregates,
    run_label,
    seed_aggregates,
    twin_seed_groups,
    unfinished_runs,
)
from agents.players.base import Agent
from agents.registry import (
    PLAY_TORCH_THREADS,
    SHIPPED_MODELS,
    agent_names,
    make_agent,
    set_torch_threads,
)
from coldiron_env.options import RuleOptions

PAIRED_DEFAULT = "heuristic"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """``--env-kwarg KEY=VALUE``s, checked: ``true``/``false`` a bool, an integer an int,
    anything else the string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--env-kwarg {item!r}: expected KEY=VALUE")
        low = value.strip().lower()
        out[key.strip()] = low == "true" if low in ("true", "false") else value
        with contextlib.suppress(ValueError):
            out[key.strip()] = int(value)
    return check_env_kwargs(out)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(__doc__)
    add = parser.add_argument
    add("--agent", action="append", required=True,
        metavar="NAME|RUN_DIR|MODEL.zip|POLICY.onnx|RLLIB_CHECKPOINT",
        help=f"agent to evaluate (repeatable); by name: {', '.join(agent_names())}")  # fmt: skip
    add("--episodes", type=int, default=10_000, help="deals (default 10000)")
    add_deal_flags(parser)
    add("--against", metavar="AGENT", default=PAIRED_DEFAULT,
        help="compare every other agent with this one, deal by deal (default %(default)r when it "
        "is evaluated)")  # fmt: skip
    add("--json", metavar="FILE", help="write the results as JSON")
    add("--plot", metavar="FILE", help="write a bar chart PNG")
    add("--html", metavar="DIR", help="write a page to replay and compare the games: "
        "DIR/index.html, self-contained (agents/web/report.py)")  # fmt: skip
    add("--torch-threads", type=int, default=PLAY_TORCH_THREADS, metavar="N",
        help="torch threads for trained models (default %(default)s: fastest on a busy "
        "machine)")  # fmt: skip
    add("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
        help=f"env option for every agent (one of {', '.join(EVAL_ENV_KWARGS)})")  # fmt: skip
    return parser


def distinct(labels: list[str], specs: list[str]) -> list[str]:
    """``labels``, each one shared by two models (rl-zoo3 names every model after the env)
    replaced by the shortest end of its spec's path that no other spec's path ends with."""
    out = list(labels)
    parts = [Path(spec.removesuffix(".zip")).parts for spec in specs]
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            k = next(
                (k for k in range(1, len(parts[i]) + 1)
                 if all(parts[i][-k:] != other[-k:] for j, other in enumerate(parts) if j != i)),
                len(parts[i]),
            )  # fmt: skip
            out[i] = "/".join(parts[i][-k:])
    return [
        spec if out.count(label) > 1 else label for label, spec in zip(out, specs, strict=True)
    ]  # still shared (a shortened label equal to another's own): the specs as given


def model_path(spec: str) -> Path | None:
    """Where the model ``spec`` names lives (a shipped network's folder for its name), if it
    is a file or folder."""
    path = SHIPPED_MODELS.get(spec, Path(spec))
    return path.resolve() if path.exists() else None


def check_outputs(args: argparse.Namespace, specs: list[str]) -> None:
    """Refuse an output that cannot be written, that two flags share, or that is a model
    given to ``--agent`` (a shipped network by its name too) or a file already in its folder:
    it would be overwritten."""
    outputs = {flag: path for flag, path in (("--json", args.json), ("--plot", args.plot)) if path}
    for flag, path in outputs.items():
        check_writable(path, flag)
        out = Path(path).resolve()
        for spec in specs:
            given = model_path(spec)
            if given is not None and (out == given or (out.exists() and given in out.parents)):
                raise ValueError(f"{flag} {path}: it would overwrite --agent {spec}'s files")
    if len({Path(path).resolve() for path in outputs.values()}) < len(outputs):
        raise ValueError(
            f"--json and --plot name the same file {args.json}: one would replace the other"
        )
    if args.html is not None:
        check_writable(args.html, "--html", folder=True)


def load_agents(
    args: argparse.Namespace, env_kwargs: dict[str, Any]
) -> tuple[list[str], list[tuple[str, Agent]], dict[str, dict[str, Any]]]:
    """The specs (seed roots expanded), the labelled agents and each one's env options, as it
    plays; ``ValueError`` naming the flag for an agent given twice, an output that would
    overwrite a model or an observation that clashes with a network's."""
    specs = [run for spec in args.agent for run in expand_seed_root(spec)]
    same = [str(model_path(spec) or spec) for spec in specs]
    twice = sorted({spec for spec, key in zip(specs, same, strict=True) if same.count(key) > 1})
    if twice:
        raise ValueError(f"--agent {', '.join(twice)}: given more than once")
    check_outputs(args, specs)
    for twins in twin_seed_groups(specs):
        say(f"warning: {twins} are runs of one config with a repeated seed: evaluated, but not "
            "aggregated across seeds")  # fmt: skip
    made = [make_agent(spec) for spec in specs]
    labels = [spec if spec in agent_names() else run_label(spec, agent.name)
              for spec, agent in zip(specs, made, strict=True)]  # fmt: skip
    agents = list(zip(distinct(labels, specs), made, strict=True))
    played_with: dict[str, dict[str, Any]] = {}
    for label, agent in agents:  # a clash with a model's observation, before any play
        try:
            played_with[label] = check_env_kwargs(agent_env_kwargs(agent, env_kwargs))
        except ValueError as err:
            raise ValueError(f"--agent {label}: {err}") from None
        trained_on = getattr(agent, "env_kwargs", None)
        if isinstance(trained_on, dict) and not getattr(agent, "env_kwargs_inferred", False):
            rules, played = RuleOptions.from_kwargs(trained_on), RuleOptions.from_kwargs(env_kwargs)
            if rules != played:
                trained, plays = (r.changes() or "the standard rules" for r in (rules, played))
                say(f"warning: {label} was trained on {trained}; it plays {plays}")
    for run, status in unfinished_runs(specs):
        state = f"status {status}" if status else "no meta.json"
        say(f"warning: {run}: not a completed training ({state}); evaluating the model it holds")
    return specs, agents, played_with


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = shlex.join(["scripts/evaluate.py", *(sys.argv[1:] if argv is None else argv)])
    stamp = code_stamp(Path(args.json) if args.json else None)  # the code, before it plays
    try:
        if not 0 < args.episodes <= MAX_EPISODES:
            raise ValueError(f"--episodes must be in 1..{MAX_EPISODES}, got {args.episodes}")
        for flag, path in (("--json", args.json), ("--plot", args.plot)):
            if path is not None and not path.strip():
                raise ValueError(f"{flag}: an empty file name")
        validation = validation_asked(args)  # the seed before any model is loaded
        env_kwargs = parse_env_kwargs(args.env_kwarg)
        set_torch_threads(args.torch_threads)
        specs, agents, played_with = load_agents(args, env_kwargs)
        labels = [label for label, _ in agents]
        by_spec = {str(model_path(s) or s): label for s, label in zip(specs, labels, strict=True)}
        by_spec.update(zip(specs, labels, strict=True))
        against = by_spec.get(str(model_path(args.against) or args.against), args.against)
        if args.against != PAIRED_DEFAULT and against not in labels:
            raise ValueError(f"--against {args.against}: not one of the agents {labels}")
    except ValueError as err:
        return refuse(err)

    finished: list[AgentResult] = []

    def progress(result: AgentResult) -> None:
        finished.append(result)
        rate = f"{100 * result.win_rate:.2f}% {result.interval_text}"
        say(f"  {result.agent}: {rate} in {result.seconds:.1f}s")

    dealt = f"{args.episodes} {args.deals} deals, seed {args.seed}"
    say(f"evaluating {len(agents)} agent(s) on {dealt}")
    partial: AgentResult | None = None  # the agent Ctrl-C stopped, with the deals it played
    interrupted = False
    try:
        results = evaluate(
            agents, args.episodes, args.seed, env_kwargs, progress=progress,
            validation=validation, keep=args.html is not None,
        )  # fmt: skip
    except KeyboardInterrupt as stop:
        partial = getattr(stop, "partial", None)  # an EvaluationInterrupted's
        if partial is not None and partial.episodes:
            kept = " (kept in --json as interrupted_agent)" if args.json else ""
            say(f"interrupted: {partial.agent} had played the first {partial.episodes} of "
                f"{args.episodes} deals: {100 * partial.win_rate:.2f}% "
                f"{partial.interval_text}{kept}")  # fmt: skip
        else:
            partial = None
        if not finished and partial is None:
            say("interrupted: no agent had finished; nothing written")
            return EXIT_INTERRUPTED
        results, interrupted = finished, True
        names = ", ".join(r.agent for r in finished) or "none"
        say(f"interrupted: reporting the {len(finished)} agent(s) that finished ({names})")
    except ValueError as err:  # the seed was checked above: an agent's or env's refusal
        return refuse(err)
    if results:
        print(format_table(results))
    pairs = paired_lines(results, against)
    if pairs:
        print(format_paired(pairs))
    elif args.against != PAIRED_DEFAULT:
        say(f"warning: --against {args.against}: it did not finish")
    try:
        aggregates = seed_aggregates(specs[: len(results)], [(r.wins, r.episodes) for r in results])
    except ValueError as err:
        return refuse(err)
    if aggregates:
        print("\nacross seeds: mean of per-seed win rates, Student-t 95%; pooled Wilson 95%")
        print(format_aggregates(aggregates))
    try:
        if args.json:
            doc = report(results, args.episodes, args.seed, env_kwargs, validation)
            for entry in doc["agents"]:
                entry["env_kwargs"] = played_with[entry["agent"]]
            seeds = [a.to_dict() for a in aggregates]
            doc.update(
                stamp, command=command, deal_set=args.deals, seed_aggregates=seeds, paired=pairs
            )
            if interrupted:
                doc["interrupted"] = f"stopped by Ctrl-C: {len(results)} of {len(agents)} agents"
            if partial is not None:  # the deals the interrupted agent had played, in order
                doc["interrupted_agent"] = {
                    **partial.to_dict(),
                    "deals_played": partial.episodes,
                    "env_kwargs": played_with[partial.agent],
                }
            atomic_write_json(args.json, doc)
            print(f"json: {args.json}")
        if args.plot and results:
            deals = f"{args.episodes:,} {args.deals} deals (seed {args.seed})"
            path = plots.plot_win_rates(
                results, args.plot, f"Cold Iron win rate on {deals}, Wilson 95% interval"
            )
            print(f"plot: {path}")
        if args.html and results and not interrupted:
            from agents.web.report import write_report

            about = {"episodes": args.episodes, "seed": args.seed, "deal_set": args.deals,
                     "command": command}  # fmt: skip
            page = write_report(
                Path(args.html), results, pairs, about, RuleOptions.from_kwargs(env_kwargs)
            )
            print(f"html: {page} ({page.stat().st_size / 1e6:.1f} MB)")
    except OSError as err:
        say(f"error: cannot write {err.filename}: {err.strerror}")
        return EXIT_ERROR
    return EXIT_INTERRUPTED if interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
