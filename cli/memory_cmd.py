"""``coe memory``: facts you give once and lookup assists find in every later run, runs' records, routing lessons."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from cli.exit_codes import user_errors
from cli.text import CoeTyper, escaped, one_line

if TYPE_CHECKING:
    from memory.store import Fact, FactMemory

memory_app = CoeTyper(
    help="What is remembered, per user, beside the runs (--checkpoint): facts (e.g. 'we deploy on PostgreSQL 16') "
    "that lookup assists search before the knowledge base, finished runs' records, and routing lessons.",
    no_args_is_help=True,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
CheckpointOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        help="Where runs (and the memory beside them) are saved: sqlite:///PATH, postgresql://..., or memory. "
        "Default: $COE_CHECKPOINT_URL, else a SQLite file in the user data directory.",
    ),
]


@contextmanager
def _memory(checkpoint: str | None) -> Iterator[FactMemory]:
    from experts.embedding import get_embedder
    from graph import open_store
    from memory.store import FactMemory
    from state.paths import LOCAL_USER

    with open_store(checkpoint) as store:
        yield FactMemory(store, LOCAL_USER, get_embedder())


def _row(fact: Fact, score: float | None = None) -> dict[str, object]:
    row: dict[str, object] = {
        "id": fact.id,
        "text": fact.text,
        "source": fact.source,
        "created_at": fact.created_at,
        "run_id": fact.run_id,
    }
    if score is not None:
        row["score"] = score
    return row


@memory_app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="The fact, in a sentence.")],
    source: Annotated[str, typer.Option(help="Who or what it comes from.")] = "person",
    checkpoint: CheckpointOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember a fact."""
    from state.errors import InputError

    with user_errors(), _memory(checkpoint) as memory:
        try:
            fact = memory.add(text, source=source)
        except ValueError as exc:
            raise InputError("fact", str(exc)) from None
    print(json.dumps(_row(fact)) if as_json else f"remembered {fact.id[:8]}: {one_line(fact.text)}")


@memory_app.command("list")
def list_facts(checkpoint: CheckpointOpt = None, as_json: JsonOpt = False) -> None:
    """List the remembered facts, oldest first."""
    with user_errors(), _memory(checkpoint) as memory:
        facts = memory.facts()
    if as_json:
        print(json.dumps([_row(f) for f in facts], indent=2))
        return
    if not facts:
        print("no facts remembered (add one with coe memory add)")
    for f in facts:
        print(f"{f.id[:8]}  {f.created_at[:10]}  {one_line(f.source):<12} {one_line(f.text)}")


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[int, typer.Option(min=1, max=50, help="How many facts.")] = 5,
    checkpoint: CheckpointOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The facts nearest QUERY by meaning, with their similarity (a lookup fills from one at 0.48 or more)."""
    if not query.strip():  # as coe kb search: an empty query finds nothing meaningful
        raise typer.BadParameter("is empty; say what you are looking for", param_hint="QUERY")
    with user_errors(), _memory(checkpoint) as memory:
        hits = memory.search(query, k=k)
        searched_by = memory.searched_by
    if as_json:
        print(json.dumps([_row(f, s) for f, s in hits], indent=2))
        return
    for f, s in hits:
        print(f"{s:.3f}  {f.id[:8]}  {one_line(f.text)}")
    print(f"(searched by {searched_by})", file=sys.stderr)


@memory_app.command("episodes")
def episodes(checkpoint: CheckpointOpt = None, as_json: JsonOpt = False) -> None:
    """List the after-action records of finished runs (episodic memory), oldest first."""
    from memory.store import EpisodeMemory

    with user_errors(), _memory(checkpoint) as memory:
        found = EpisodeMemory(memory.store, memory.user, memory.embedder).episodes()
    if as_json:
        print(json.dumps([e.__dict__ for e in found], indent=2))
        return
    if not found:
        print("no runs recorded yet")
    for e in found:
        passed = f"{sum(1 for s in e.slots if s.get('passed'))}/{len(e.slots)} passed"
        plan = e.template or "no template"
        print(f"{e.run_id[:8]}  {e.created_at[:10]}  {e.status:<9} {plan:<32} {passed:<11} {one_line(e.task[:60])}")


@memory_app.command("show")
def show(
    item_id: Annotated[
        str, typer.Argument(metavar="ID", help="A fact's id, a run's id or a lesson's id (or a prefix).")
    ],
    checkpoint: CheckpointOpt = None,
) -> None:
    """Everything remembered under one id: a fact, a run's after-action record (with feedback) or a routing lesson."""
    from memory.routing_lessons import RoutingLessons
    from memory.store import EpisodeMemory
    from state.errors import InputError

    with user_errors(), _memory(checkpoint) as memory:
        found: list[tuple[str, dict[str, object]]] = [
            ("fact", _row(f)) for f in memory.facts() if f.id.startswith(item_id)
        ]
        episodes = EpisodeMemory(memory.store, memory.user, memory.embedder).episodes()
        found += [("run", dict(e.__dict__)) for e in episodes if e.run_id.startswith(item_id)]
        lessons = RoutingLessons(memory.store, memory.user).records()
        found += [("routing lesson", dict(r.__dict__)) for r in lessons if r.id.startswith(item_id)]
        if len(found) != 1:
            what = "nothing is remembered under" if not found else f"{len(found)} items match"
            raise InputError("id", f"{what} {item_id!r} (coe memory list, episodes or lessons show the ids)")
    kind, item = found[0]
    print(json.dumps({"kind": kind, **item}, indent=2, default=list))


@memory_app.command("lessons")
def lessons(checkpoint: CheckpointOpt = None, as_json: JsonOpt = False) -> None:
    """List the routing lessons given with coe feedback (kept ones train the router; refused ones say why)."""
    from memory.routing_lessons import RoutingLessons

    with user_errors(), _memory(checkpoint) as memory:
        found = RoutingLessons(memory.store, memory.user).records()
    if as_json:
        print(json.dumps([r.__dict__ for r in found], indent=2))
        return
    if not found:
        print("no routing lessons yet (coe feedback THREAD good|bad --slot ID [--route-to EXPERT])")
    for r in found:
        status = "kept" if r.kept else "refused"
        print(f"{r.id[:8]}  {r.created_at[:10]}  {status:<7}  {r.routed} -> {r.expert}  {one_line(r.text[:70])}")
        if not r.kept:
            print(f"          {r.reason}")


@memory_app.command("forget")
def forget(
    fact_id: Annotated[str | None, typer.Argument(help="The fact's id (or the first characters of it).")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Forget every fact this run wrote, its record and its lessons.")
    ] = None,
    checkpoint: CheckpointOpt = None,
) -> None:
    """Forget one fact, or every fact a run wrote with its after-action record and the routing lessons about it."""
    from state.errors import InputError

    with user_errors():
        if (fact_id is None) == (run is None):
            raise InputError("forget", "give a fact id or --run RUN_ID (one of them)")
        with _memory(checkpoint) as memory:
            if run is not None:
                from memory.routing_lessons import RoutingLessons
                from memory.store import EpisodeMemory

                gone = memory.forget_run(run)
                record = EpisodeMemory(memory.store, memory.user, memory.embedder).forget_run(run)
                taught = RoutingLessons(memory.store, memory.user).forget_run(run)
                print(
                    f"forgot {len(gone)} fact(s) of run {run}"
                    + (" and its after-action record" if record else "")
                    + (f" and {len(taught)} routing lesson(s)" if taught else "")
                )
                return
            assert fact_id is not None
            fact = memory.forget(fact_id)
            if fact is None:
                raise InputError("fact id", f"{fact_id!r} matches no fact, or more than one (coe memory list)")
            print(f"forgot {fact.id[:8]}: {one_line(fact.text)}")


def feedback(
    thread_id: Annotated[str, typer.Argument(help="The thread of the run (its latest run is the one judged).")],
    verdict: Annotated[str, typer.Argument(help="good or bad.")],
    slot: Annotated[str | None, typer.Option("--slot", help="Judge one slot of the run (its id).")] = None,
    expert: Annotated[str | None, typer.Option("--expert", help="Judge one expert of the run (its id).")] = None,
    route_to: Annotated[
        str | None,
        typer.Option("--route-to", help="With bad --slot: the expert the slot should have gone to (a routing lesson)."),
    ] = None,
    note: Annotated[str, typer.Option("--note", help="What was good or bad, in words.")] = "",
    checkpoint: CheckpointOpt = None,
) -> None:
    """Say whether a run's result was good or bad (the whole run, one slot or one expert).

    The verdict joins the run's after-action record: planning a similar task later passes over a template whose
    run you called bad. On a slot it is also a routing lesson: good confirms the slot's expert, bad --route-to
    EXPERT corrects it. A lesson is kept only if it is plausible and the router still routes its guard set as
    well (coe memory lessons shows what was kept and why not).
    """
    from graph import build_graph, open_checkpointer
    from graph.persistence import load_run
    from memory.feedback import give_feedback
    from state.errors import ConfigError

    with user_errors():
        with open_checkpointer(checkpoint) as saver:
            _, state = load_run(build_graph(saver), thread_id)
        if state is None or state.run is None:
            raise ConfigError("thread id", f"no run {thread_id!r} is saved there")
        with _memory(checkpoint) as memory:
            outcome = give_feedback(
                state, memory.store, memory.embedder, verdict, slot, expert, route_to, note, names=_FEEDBACK_NAMES
            )
    print(escaped("\n".join(outcome.lines())))


_FEEDBACK_NAMES = {"slot": "--slot", "expert": "--expert", "route_to": "--route-to"}
