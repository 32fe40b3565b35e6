"""``coe route`` and ``coe experts``: ask the router where a text would go, and read the expert catalog.

Heavy modules (the embedder, FAISS) are imported inside the commands, so ``coe --help`` stays fast and
``coe route`` pays only for what it uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.exit_codes import user_errors
from cli.text import CoeTyper

experts_app = CoeTyper(
    help="The expert catalog: shipped scope documents, your own experts (COE_HOME/experts) and installed packs.",
    no_args_is_help=True,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def route(
    text: Annotated[str, typer.Argument(help="A slot-sized piece of work to route.")],
    as_json: JsonOpt = False,
    lam: Annotated[
        float | None, typer.Option("--lambda", help="Exclusion penalty (default: COE_ROUTING_LAMBDA or calibrated).")
    ] = None,
    threshold: Annotated[float | None, typer.Option("--threshold", help="Low-confidence fallback threshold.")] = None,
    tie_margin: Annotated[
        float | None,
        typer.Option(
            "--tie-margin", help="Top-two gap under which a task-type specialist wins over a domain specialist."
        ),
    ] = None,
    fast_gap: Annotated[
        float | None,
        typer.Option(
            "--fast-gap",
            help="Top-two gap from which the static first stage decides without the encoder (1: always the encoder).",
        ),
    ] = None,
) -> None:
    """Show which expert a text is routed to, with every expert's score."""
    from experts.routing.router import RouterParams, get_router
    from state.context import resolve_settings

    with user_errors():
        given = {
            "routing_lambda": lam,
            "routing_threshold": threshold,
            "routing_tie_margin": tie_margin,
            "routing_fast_gap": fast_gap,
        }
        settings = resolve_settings({k: v for k, v in given.items() if v is not None})
        params = RouterParams.from_settings(settings)
        if not text.strip():
            raise typer.BadParameter("is empty; give the text to route", param_hint="TEXT")
        result = get_router(params).route(text)
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    print(
        f"expert: {result.expert}  score {result.score:.3f}"
        + ("  (low-confidence fallback)" if result.fallback else "")
        + ("  (decided by the static first stage)" if result.stage == "static" else "")
    )
    if result.rule == "tie_prefers_task_type":
        print(f"tie rule: task-type specialist preferred over {result.raw_best}")
    learned = f" {'learned':>8}" if result.learned else ""
    print(f"{'expert':22} {'net':>7} {'capability':>11} {'exclusion':>10}{learned}")
    for expert_id, net in result.scores.items():
        mark = " <" if expert_id == result.expert else ""
        cap, exc = result.capability[expert_id], result.exclusion[expert_id]
        term = f" {result.learned[expert_id]:8.3f}" if result.learned else ""
        print(f"{expert_id:22} {net:7.3f} {cap:11.3f} {exc:10.3f}{term}{mark}")


def _binding(scope: Any) -> str:
    if scope.is_true_expert:
        return f"true: {scope.model.model} (fallback: {scope.model.fallback})"
    return "faux: persona over the base model"


def _exam_line(catalog: Any, expert_id: str) -> str:
    from experts.catalog.exams import read_record

    record = read_record(expert_id, catalog.get(expert_id).version)
    if record is not None:
        return record.line()
    return "not examined" if expert_id in catalog.exams else "no exam"


@experts_app.command("list")
def list_experts(as_json: JsonOpt = False) -> None:
    """List the experts: id, kind, version, origin, model binding, exam and what each is for."""
    from experts.catalog import load_catalog

    with user_errors():
        catalog = load_catalog()
    rows = [
        {
            "id": s.id,
            "display_name": s.display_name,
            "kind": s.kind,
            "version": s.version,
            "origin": catalog.origin(s.id).label(),
            "path": str(catalog.origin(s.id).path),
            "binding": s.model.binding,
            "model": s.model.model,
            "summary": s.summary,
            "exam": _exam_line(catalog, s.id),
            "routed": s.id not in catalog.benched,
        }
        for s in catalog
    ]
    if as_json:
        print(json.dumps({"directory": str(catalog.directory), "experts": rows}, indent=2))
        return
    for scope in catalog:
        default = "  (default)" if scope.id == catalog.default_expert else ""
        origin = catalog.origin(scope.id).label()
        print(f"{scope.id:20} {scope.kind:8} v{scope.version:6} {origin:10} {_binding(scope)}{default}")
        print(f"{'':20} {scope.summary}")
        if scope.id in catalog.benched:
            print(f"{'':20} OUT OF ROUTING: {catalog.benched[scope.id]}")


@experts_app.command("show")
def show_expert(
    expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert id (see coe experts list).")],
    as_json: JsonOpt = False,
) -> None:
    """Print one expert's scope document: capabilities, exclusions, persona, weaknesses, binding, origin, exam."""
    from experts.catalog import load_catalog

    with user_errors():
        catalog = load_catalog()
        scope = catalog.get(expert_id)
    origin = catalog.origin(expert_id)
    if as_json:
        data = scope.model_dump(mode="json")
        data["capabilities"], data["exclusions"] = scope.capabilities, scope.exclusions
        data["origin"] = {"kind": origin.kind, "path": str(origin.path), "package": origin.package}
        data["exam"] = _exam_line(catalog, expert_id)
        data["routed"] = expert_id not in catalog.benched
        print(json.dumps(data, indent=2))
        return
    print(f"{scope.display_name} ({scope.id}), {scope.kind} specialist" if scope.kind != "general" else scope.id)
    print(scope.summary)
    print(f"\nversion: {scope.version}, {origin.label()} ({origin.path})")
    print(f"model: {_binding(scope)}")
    gen = scope.generation
    print(f"generation defaults: temperature {gen.temperature}, max_tokens {gen.max_tokens}")
    print(f"verified: {scope.verification.date} ({scope.verification.method})")
    print(f"exam: {_exam_line(catalog, expert_id)}")
    if expert_id in catalog.benched:
        print(f"OUT OF ROUTING: {catalog.benched[expert_id]}")
    print("\ncapabilities:")
    print("\n".join(f"  - {line}" for line in scope.capabilities))
    print("\nexclusions:")
    print("\n".join(f"  - {line}" for line in scope.exclusions))
    print("\npersona:")
    print("\n".join(f"  {line}" for line in scope.persona.splitlines()))
    if scope.known_weaknesses:
        print("\nknown weaknesses:")
        print("\n".join(f"  - {w}" for w in scope.known_weaknesses))


@experts_app.command("add")
def add(
    path: Annotated[
        Path, typer.Argument(help="The expert's directory (scope.yaml, optional examples.txt, exam.yaml).")
    ],
    replace: Annotated[bool, typer.Option("--replace", help="Replace your expert of the same id.")] = False,
    candidate: Annotated[
        bool,
        typer.Option("--candidate", help="Add it as a candidate version of the expert of its id (not routed)."),
    ] = False,
    no_exam: Annotated[
        bool, typer.Option("--no-exam", help="Do not take its exam now (it routes until an exam fails).")
    ] = False,
) -> None:
    """Check an expert directory, add it to your catalog (COE_HOME/experts) and take its exam (exit 1: it failed)."""
    from experts.catalog import add_expert, load_catalog
    from experts.catalog.versions import add_candidate

    with user_errors():
        if candidate:
            found = add_candidate(path)
            sid, version = found.scope.id, found.scope.version
            print(f"added {sid} v{version} as a candidate ({found.directory}); not routed")
            if found.exam is None and sid not in load_catalog().exams:
                print("it has no exam: write exam.yaml to compare it with the current version")
            elif no_exam:
                print(f"exam not taken; take it with: coe experts examine {sid} --version {version}")
            elif not _examine(sid, version=version).passed:
                raise typer.Exit(1)  # kept as a candidate; its exam says why it is not ready
            return
        added = add_expert(path, replace_existing=replace)
        scope = added.scope
        print(f"added {scope.id} v{scope.version} ({scope.kind}) to {added.directory}")
        catalog = load_catalog()
        router = _router_after_change(catalog)
        print(router)
        if added.exam is None:
            print("it has no exam (exam.yaml): it routes without one")
            return
        if no_exam:
            print(f"exam not taken (--no-exam); take it with: coe experts examine {scope.id}")
            return
        if not _examine(scope.id).passed:
            raise typer.Exit(1)  # added, and out of routing until it passes


@experts_app.command("remove")
def remove(expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert you added.")]) -> None:
    """Remove an expert you added (shipped experts stay; a package's go with pip uninstall)."""
    from experts.catalog import load_catalog, remove_expert

    with user_errors():
        gone = remove_expert(expert_id)
        print(f"removed {expert_id} ({gone})")
        print(_router_after_change(load_catalog()))


@experts_app.command("examine")
def examine_cmd(
    expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert with an exam.")],
    version: Annotated[
        str | None, typer.Option("--version", help="Examine this candidate version instead of the current one.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Take an expert's exam on the installed models and keep the score; below its bar it leaves routing."""
    with user_errors():
        record = _examine(expert_id, version=version, quiet=as_json)
    if as_json:
        print(record.model_dump_json(indent=2))
    if not record.passed:
        raise typer.Exit(1)


def _examine(expert_id: str, *, version: str | None = None, quiet: bool = False) -> Any:
    from graph.examine import examine

    def show(result: Any) -> None:
        if not quiet:
            mark = "pass" if result.passed else "FAIL"
            print(f"  {mark} {result.id} ({result.seconds:.1f} s)" + "".join(f"\n       {f}" for f in result.failed))

    if not quiet:
        print(f"examining {expert_id}{f' v{version} (candidate)' if version else ''} ...")
    record = examine(expert_id, version=version, progress=show)
    if not quiet:
        print(f"{expert_id}: {record.line()}; {record.seconds:.0f} s")
        if not record.passed and version is None:
            print(f"{expert_id} is out of routing until it passes: its slots go to the generalist")
    return record


@experts_app.command("versions")
def versions_cmd(
    expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show an expert's current version, its candidates and earlier versions with their exams, and its history."""
    from experts.catalog import load_catalog
    from experts.catalog.exams import read_record
    from experts.catalog.shadow_queue import share
    from experts.catalog.versions import candidates, history, previous, shadow_tally, tally_line

    with user_errors():
        catalog = load_catalog()
        scope = catalog.get(expert_id)

    def exam(version: str) -> str:
        record = read_record(expert_id, version)
        return record.line() if record is not None else "not examined"

    rows = [{"version": scope.version, "state": "current", "origin": catalog.origin(expert_id).label()}]
    rows += [
        {
            "version": v,
            "state": "candidate",
            "origin": str(p),
            "shadow": tally_line(shadow_tally(expert_id, v))
            + (f"; {given.line()}" if (given := share(expert_id, v)) else ""),
        }
        for v, p in candidates(expert_id).items()
    ]
    rows += [{"version": v, "state": "previous", "origin": str(p)} for v, p in previous(expert_id).items()]
    for row in rows:
        row["exam"] = exam(row["version"])
    steps = history(expert_id)
    if as_json:
        print(json.dumps({"expert": expert_id, "versions": rows, "history": steps}, indent=2))
        return
    for row in rows:
        shadow = f"; {row['shadow']}" if "shadow" in row else ""
        print(f"v{row['version']:8} {row['state']:9} {row['exam']}{shadow}  ({row['origin']})")
    for step in steps:
        evidence = step.get("evidence") or {}
        why = (
            f"; evidence: v{step['to']} {evidence.get('to')}, v{step['from']} {evidence.get('from')}"
            if evidence
            else ""
        )
        forced = " (forced)" if step.get("forced") else ""
        forced = forced or (f" (by its shadow rule: {step['rule']})" if step.get("rule") else "")
        print(f"{step['at']} {step['action']} v{step['from']} -> v{step['to']}{forced}{why}")


@experts_app.command("promote")
def promote_cmd(
    expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert id.")],
    version: Annotated[str, typer.Argument(metavar="VERSION", help="A candidate version.")],
    force: Annotated[
        bool, typer.Option("--force", help="Promote without a passing exam at least as good as the current one.")
    ] = False,
) -> None:
    """Make a candidate version current, on the evidence of its exam against the current version's."""
    from experts.catalog.versions import promote

    with user_errors():
        step = promote(expert_id, version, force=force)
    print(f"{expert_id}: v{step['from']} -> v{step['to']}{' (forced)' if step['forced'] else ''}")
    evidence = step["evidence"]
    print(f"evidence: v{step['to']} {evidence['to']}; v{step['from']} {evidence['from']}; {evidence['shadow']}")


@experts_app.command("shadow")
def shadow_cmd(
    expert_id: Annotated[str | None, typer.Argument(metavar="[ID]", help="An expert id.")] = None,
    version: Annotated[str | None, typer.Argument(metavar="[VERSION]", help="A candidate version.")] = None,
    slots: Annotated[int, typer.Option("--slots", min=1, max=100, help="How many saved slots to answer again.")] = 5,
    share: Annotated[
        float | None,
        typer.Option("--share", help="Queue this share (0-1) of the expert's live slots for the candidate; 0 stops."),
    ] = None,
    promote_after: Annotated[
        int | None,
        typer.Option("--promote-after", help="With --share: promote automatically after this many shadow slots ..."),
    ] = None,
    margin: Annotated[
        int, typer.Option("--margin", help="... when the candidate's wins pass the served answers' by this many.")
    ] = 1,
    queued: Annotated[
        bool, typer.Option("--queued", help="Answer the queued live slots now (stops when a run is in flight).")
    ] = False,
    limit: Annotated[int | None, typer.Option("--max", min=1, help="With --queued: answer at most this many.")] = None,
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="Where the runs are saved (default as coe run).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Have a candidate version answer real slots its expert served, and score both answers by the slot's checks.

    ID VERSION answers the newest saved slots now; with --share, a share of the expert's live slots is queued as
    runs end and answered in spare time (the server's idle worker, or --queued); --queued alone lists and answers
    the queue.
    """
    from dataclasses import asdict

    from experts.catalog.shadow_queue import pending, set_share
    from experts.catalog.versions import shadow_tally, tally_line
    from graph.shadow import drain, shadow
    from state.errors import ConfigError

    def show(r: Any) -> None:
        if as_json:
            return
        judged = " (judge)" if r.judged else ""
        promoted = f"; {r.expert} v{r.version} promoted by its shadow rule" if r.promoted else ""
        print(
            f"  {r.expert} v{r.version} {r.thread_id[:8]} {r.slot_id}: served v{r.served_version} "
            f"{r.served_score:.1f}, candidate {r.candidate_score:.1f} -> {r.winner}{judged} ({r.seconds:.0f} s)"
            + promoted
        )

    with user_errors():
        if queued:
            if expert_id is not None or share is not None:
                raise ConfigError("--queued", "takes no ID, VERSION or --share: it answers the whole queue")
            waiting = len(pending())
            if not as_json:
                print(f"{waiting} queued shadow slot(s)")
            done, why = drain(limit=limit, checkpoint=checkpoint, progress=show)
            if as_json:
                print(json.dumps({"answered": [asdict(r) for r in done], "stopped": why, "left": len(pending())}))
            else:
                print(f"answered {len(done)}; stopped: {why}; {len(pending())} left")
            return
        if expert_id is None or version is None:
            raise ConfigError("ID VERSION", "name the expert and its candidate version (or give --queued)")
        if share is not None:
            given = set_share(expert_id, version, share, promote_after=promote_after, margin=margin)
            print(f"{expert_id} v{version}: " + (given.line() if given else "no share of live slots"))
            return
        if promote_after is not None:
            raise ConfigError("--promote-after", "goes with --share: the rule applies to a share of live slots")
        if not as_json:
            print(f"answering {expert_id}'s saved slots again with v{version} ...")
        done = shadow(expert_id, version, checkpoint=checkpoint, slots=slots, progress=show)
    if as_json:
        print(json.dumps({"answered": [asdict(r) for r in done], "tally": shadow_tally(expert_id, version)}))
    else:
        print(f"{expert_id} v{version}: {tally_line(shadow_tally(expert_id, version))}")


@experts_app.command("rollback")
def rollback_cmd(expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert id.")]) -> None:
    """Undo an expert's last promotion: the version it replaced is current again."""
    from experts.catalog.versions import rollback

    with user_errors():
        step = rollback(expert_id)
    print(f"{expert_id}: v{step['from']} -> v{step['to']} (rolled back; v{step['from']} is a candidate again)")


def _router_after_change(catalog: Any) -> str:
    """Build the router for the changed catalog now (only the changed expert is embedded), and say so."""
    import time

    from experts.routing.router import get_router

    t0 = time.perf_counter()
    router = get_router(catalog=catalog)
    index = router.index
    how = (
        f"embedded {index.embedded_experts} expert(s), the others' vectors cached"
        if index.built
        else "index already current"
    )
    return (
        f"routing: {len(index.expert_ids)} experts, router {router.version} ({how}; {time.perf_counter() - t0:.1f} s)"
    )
