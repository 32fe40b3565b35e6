"""``coe route`` and ``coe experts``: ask the router where a text would go, and read the expert catalog.

Heavy modules (the embedder, FAISS) are imported inside the commands, so ``coe --help`` stays fast and
``coe route`` pays only for what it uses.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from cli.exit_codes import user_errors
from cli.text import CoeTyper

experts_app = CoeTyper(
    help="The expert catalog: scope documents in config/expert_scopes.",
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


@experts_app.command("list")
def list_experts(as_json: JsonOpt = False) -> None:
    """List the experts: id, kind, model binding and what each is for."""
    from experts.catalog import load_catalog

    with user_errors():
        catalog = load_catalog()
    rows = [
        {
            "id": s.id,
            "display_name": s.display_name,
            "kind": s.kind,
            "binding": s.model.binding,
            "model": s.model.model,
            "summary": s.summary,
        }
        for s in catalog
    ]
    if as_json:
        print(json.dumps({"directory": str(catalog.directory), "experts": rows}, indent=2))
        return
    for scope in catalog:
        default = "  (default)" if scope.id == catalog.default_expert else ""
        print(f"{scope.id:20} {scope.kind:8} {_binding(scope)}{default}")
        print(f"{'':20} {scope.summary}")


@experts_app.command("show")
def show_expert(
    expert_id: Annotated[str, typer.Argument(metavar="ID", help="An expert id (see coe experts list).")],
    as_json: JsonOpt = False,
) -> None:
    """Print one expert's scope document: capabilities, exclusions, persona, weaknesses, binding."""
    from experts.catalog import load_catalog

    with user_errors():
        scope = load_catalog().get(expert_id)
    if as_json:
        data = scope.model_dump(mode="json")
        data["capabilities"], data["exclusions"] = scope.capabilities, scope.exclusions
        print(json.dumps(data, indent=2))
        return
    print(f"{scope.display_name} ({scope.id}), {scope.kind} specialist" if scope.kind != "general" else scope.id)
    print(scope.summary)
    print(f"\nmodel: {_binding(scope)}")
    gen = scope.generation
    print(f"generation defaults: temperature {gen.temperature}, max_tokens {gen.max_tokens}")
    print(f"verified: {scope.verification.date} ({scope.verification.method})")
    print("\ncapabilities:")
    print("\n".join(f"  - {line}" for line in scope.capabilities))
    print("\nexclusions:")
    print("\n".join(f"  - {line}" for line in scope.exclusions))
    print("\npersona:")
    print("\n".join(f"  {line}" for line in scope.persona.splitlines()))
    if scope.known_weaknesses:
        print("\nknown weaknesses:")
        print("\n".join(f"  - {w}" for w in scope.known_weaknesses))
