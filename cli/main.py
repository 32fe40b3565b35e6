"""The ``coe`` command line: run a task, resume a killed run, show a saved run.

Exit codes: 0 the run completed; 1 the run ended partial, failed or rejected; 2 a usage or configuration error
(the message names the argument, file or field); 3 the run waits for an answer (``coe resume THREAD_ID
--answer ...``); 130 interrupted (the run can be resumed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN, EXIT_WAITING, user_errors
from cli.experts_cmd import experts_app, route
from cli.kb_cmd import kb_app
from cli.memory_cmd import feedback, memory_app
from cli.retention_cmd import prune
from cli.status_cmd import status
from cli.templates_cmd import templates_app
from cli.text import CoeTyper, escaped, one_line
from engine.artifacts import code_artifacts
from state.context import RunContext
from state.enums import Mode, RunStatus
from state.errors import ConfigError, InputError
from state.framework import load_framework_file
from state.io import RunInput, RunOptions
from state.passport import Passport
from state.quality import SlotQuality

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import Interrupt, StreamMode

app = CoeTyper(
    name="coe",
    help="College of Experts: split a task into slots, run local experts, assemble the answer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class BackendChoice(StrEnum):
    """Expert backends selectable on the command line."""

    llama = "llama"
    fake = "fake"
    remote = "remote"


CheckpointOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        help="Where runs are saved: sqlite:///PATH, postgresql://..., or memory. Default: $COE_CHECKPOINT_URL, "
        "else a SQLite file in the user data directory.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON summary.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the Markdown document to this file.")]
LedgerOpt = Annotated[bool, typer.Option("--ledger", help="Append the ledger to the document.")]
StreamOpt = Annotated[
    bool,
    typer.Option(
        "--stream",
        help="Print each expert's answer to standard error as it is written (a header names the slot and candidate "
        "whenever the writer changes); the document still goes to standard output.",
    ),
]
AbandonOpt = Annotated[
    bool,
    typer.Option(
        "--abandon",
        help="With --thread: run this task even though the thread's earlier run waits for an answer or stopped "
        "half-way; that run is abandoned (the new run records it). Without it such a task is refused: "
        "coe resume THREAD_ID continues the earlier run.",
    ),
]
OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out-dir",
        help="Write the document (answer.md) and every code slot's module and tests as files into this directory.",
    ),
]


ModelOpt = Annotated[str | None, typer.Option(help="Bundled model name or path to a GGUF file [env: COE_MODEL].")]
FakeScriptOpt = Annotated[Path | None, typer.Option(help="Script for the fake backend [env: COE_FAKE_SCRIPT].")]
GrammarOpt = Annotated[
    bool | None, typer.Option("--grammar/--no-grammar", help="Constrain output to the outline contract.")
]
TemplatesOpt = Annotated[
    bool | None,
    typer.Option(
        "--templates/--no-templates",
        help="Scope the task (trivial / one expert / a plan) and adapt a template from the library to it; "
        "--no-templates runs the whole task as one slot [env: COE_USE_TEMPLATES].",
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        help="Hardware profile from config/hardware_profiles.yaml, or auto (detect this machine) "
        "[env: COE_PROFILE]; see coe experts status."
    ),
]
MemoryLimitOpt = Annotated[
    int | None,
    typer.Option(
        "--memory-limit",
        min=64,
        help="Memory in MB the process may use for models and runtime; models are loaded, preloaded and "
        "evicted to stay under it [env: COE_MEMORY_LIMIT_MB].",
    ),
]
ThreadIdOpt = Annotated[
    str | None,
    typer.Option(
        "--thread",
        "--thread-id",
        help="Thread id to use (default: a new UUID). A thread that already ran gets a follow-up turn: the "
        "previous turn's answer is the new run's working memory.",
    ),
]


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="The task, in plain language ('-' reads it from standard input).")],
    mode: Annotated[Mode, typer.Option(help="How much the harness may ask you.")] = Mode.AUTONOMOUS,
    framework: Annotated[Path | None, typer.Option(help="Run this framework (YAML) instead of choosing one.")] = None,
    backend: Annotated[BackendChoice | None, typer.Option(help="Expert backend [env: COE_BACKEND].")] = None,
    model: ModelOpt = None,
    fake_script: FakeScriptOpt = None,
    max_parallel: Annotated[int | None, typer.Option(min=1, max=64, help="Slots run at once.")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=16, help="Token budget per slot answer.")] = None,
    grammar: GrammarOpt = None,
    templates: TemplatesOpt = None,
    profile: ProfileOpt = None,
    memory_limit: MemoryLimitOpt = None,
    thread_id: ThreadIdOpt = None,
    abandon: AbandonOpt = False,
    checkpoint: CheckpointOpt = None,
    out: OutOpt = None,
    out_dir: OutDirOpt = None,
    as_json: JsonOpt = False,
    ledger: LedgerOpt = False,
    stream: StreamOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details to stderr.")] = False,
) -> None:
    """Run TASK end to end and print the assembled Markdown document."""
    _logging(verbose)
    with user_errors():
        text = _stdin_task() if task == "-" else task
        options = RunOptions(abandon=abandon)
        if framework is not None:
            fw = load_framework_file(str(framework))
            options = RunOptions(framework=fw.model_dump(mode="json"), framework_source=str(framework), abandon=abandon)
        context = RunContext(  # typer bounds the flags; a bad value would still be a ConfigError naming it
            backend=backend.value if backend else None,
            model_path=model,
            fake_script=str(fake_script) if fake_script else None,
            max_parallel=max_parallel,
            max_tokens=max_tokens,
            use_grammar=grammar,
            use_templates=templates,
            profile=profile,
            memory_limit_mb=memory_limit,
        )
        from nodes.guard import validate_run

        # Every check the guard makes, before anything is saved: a run that starts cannot fail in the guard, so its
        # settings are recorded by its first step and a resume always runs with them.
        valid = validate_run(text, mode, options, context)
        text = valid.task
        from experts.catalog import load_catalog, prepare_models

        prepare_models(valid.settings, load_catalog())  # begun here, before the graph is built (see the guard)
        output = Output(out, out_dir, as_json, ledger, stream)
        _check_output(output)
        run_input = RunInput(task=text, mode=mode, options=options)
        tid = thread_id or str(uuid.uuid4())
        code = _drive(run_input, tid, checkpoint, context, output)
    raise typer.Exit(code)


def _check_output(output: Output) -> None:
    """Refuse an output path that cannot be written before the run starts, not after it has finished."""
    if output.out is not None:
        if output.out.is_dir():
            raise ConfigError("--out", f"{output.out} is a directory; give a file path, or use --out-dir")
        if not output.out.parent.is_dir():
            raise ConfigError("--out", f"directory {output.out.parent} does not exist; create it first")
    if output.out_dir is not None and output.out_dir.exists() and not output.out_dir.is_dir():
        raise ConfigError("--out-dir", f"{output.out_dir} is a file; give a directory (it is created if missing)")


def _stdin_task() -> str:
    """The task read from standard input, which must be UTF-8 text."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is not part of the task
    except UnicodeDecodeError as exc:
        raise InputError(
            "task (standard input)", f"is not UTF-8 text (byte {exc.start}); convert it, e.g. with iconv -t UTF-8"
        ) from None


@app.command()
def resume(
    thread_id: Annotated[str, typer.Argument(help="The thread id printed when the run started.")],
    answer: Annotated[
        str | None,
        typer.Option(help='Answer to the pending question: text, or JSON (e.g. \'{"action": "reject"}\').'),
    ] = None,
    answers_file: Annotated[
        Path | None,
        typer.Option(help="Answers as YAML/JSON: one answer, or a map from interrupt id to answer."),
    ] = None,
    checkpoint: CheckpointOpt = None,
    out: OutOpt = None,
    out_dir: OutDirOpt = None,
    as_json: JsonOpt = False,
    ledger: LedgerOpt = False,
    stream: StreamOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Continue a run that was killed, interrupted or is waiting for an answer; finished slots are not run again."""
    _logging(verbose)
    with user_errors():
        given = (answer, answers_file) if answer is not None or answers_file is not None else None
        code = _drive(None, thread_id, checkpoint, None, Output(out, out_dir, as_json, ledger, stream), given)
    raise typer.Exit(code)


@app.command()
def threads(
    checkpoint: CheckpointOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many runs, newest first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List saved runs: thread id, status, what they wait for, task; a run that cannot be read gets one line.

    A run that a process runs now (it holds the thread's lease) is ``running``; one that stopped half-way and can
    be resumed is ``stopped``. Stored text is printed with control characters escaped (``--json`` escapes them).
    """
    from graph import build_graph, open_checkpointer
    from graph.lease import live_leases
    from graph.persistence import list_threads, load_run, resume_points

    with user_errors(), open_checkpointer(checkpoint) as saver:
        graph = build_graph(saver)
        running = live_leases(saver)
        rows: list[dict[str, Any]] = []
        for tid in list_threads(saver, limit):
            try:
                snapshot, state = load_run(graph, tid)
            except ConfigError as exc:  # one damaged run must not hide the others
                print(f"{one_line(tid)}  unreadable: {one_line(str(exc))}", file=sys.stderr)
                rows.append(
                    {
                        "thread_id": tid,
                        "status": "unreadable",
                        "waiting_for": [],
                        "updated": "",
                        "task": "",
                        "error": str(exc),
                    }
                )
                continue
            if state is None:
                continue
            waiting = [str(i.value.get("kind", "?")) for i in snapshot.interrupts if isinstance(i.value, dict)]
            status = "waiting" if waiting else state.status.value
            if tid in running:
                status = "running"  # a process holds the thread's lease and runs it now
            elif not waiting and resume_points(snapshot) and state.status != RunStatus.REJECTED:
                status = "stopped"  # killed or failed mid-run: resumable
            task = state.mission.task if state.mission else str(state.task)
            updated = state.updated_at.isoformat(timespec="seconds") if state.updated_at else ""
            rows.append({"thread_id": tid, "status": status, "waiting_for": waiting, "updated": updated, "task": task})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        if r["status"] == "unreadable":
            continue  # said on stderr
        what = f" ({', '.join(r['waiting_for'])})" if r["waiting_for"] else ""
        task = one_line(r["task"])
        task = task if len(task) <= 60 else task[:57] + "..."
        print(f"{one_line(r['thread_id'])}  {r['status'] + what:<24} {r['updated']:<25} {task}")


@app.command()
def show(
    thread_id: Annotated[str, typer.Argument(help="The thread id of a saved run.")],
    checkpoint: CheckpointOpt = None,
    as_json: JsonOpt = False,
    ledger: LedgerOpt = True,
    out_dir: OutDirOpt = None,
) -> None:
    """Show a saved run: status, slots, their checks, warnings and the ledger."""
    from graph import build_graph, open_checkpointer
    from graph.persistence import load_run, resume_points

    with user_errors(), open_checkpointer(checkpoint) as saver:
        snapshot, state = load_run(build_graph(saver), thread_id)
        if state is None:
            raise ConfigError("thread id", f"no run {thread_id!r} is saved at {_where(checkpoint)}")
        if out_dir is not None:
            _write_files(state, out_dir)
        if as_json:
            # every slot's result with its checks and candidates; an earlier turn's results stay out (coe show
            # lists the turns, and their documents hold what those results said)
            payload = state.model_dump(mode="json", exclude={"turns": {"__all__": {"results"}}})
            payload["next"] = resume_points(snapshot)
            print(json.dumps(payload, indent=2))
            return
        print(escaped(_describe(state, resume_points(snapshot))))
        if ledger:
            from nodes.assemble import render_ledger

            print()
            print(escaped(render_ledger(state.ledger)))


@dataclass(frozen=True)
class Output:
    """Where and how a finished run's result is reported."""

    out: Path | None = None
    out_dir: Path | None = None
    as_json: bool = False
    ledger: bool = False
    stream: bool = False
    """Print the experts' tokens to standard error as they are written (``--stream``)."""


def _drive(
    run_input: RunInput | None,
    thread_id: str,
    checkpoint: str | None,
    context: RunContext | None,
    output: Output,
    given: tuple[str | None, Path | None] | None = None,
) -> int:
    from langgraph.types import Command

    from cli.answers import ask_in_terminal, resume_value
    from cli.progress import Progress
    from graph import build_graph, open_checkpointer, open_store
    from graph.lease import thread_lease
    from graph.persistence import connection_lost, load_run, resume_points

    config = _config(thread_id)
    # The lease: one runner per thread (a second `coe resume` of a running thread exits 2 naming the holder).
    with (
        open_checkpointer(checkpoint) as saver,
        open_store(checkpoint) as store,
        thread_lease(saver, thread_id) as lease,
        contextlib.ExitStack() as stack,
    ):
        graph = build_graph(saver, store=store)
        stack.enter_context(connection_lost(saver, thread_id))  # PostgreSQL gone mid-run: exit 2, not a traceback
        if run_input is not None and not run_input.options.abandon:
            _refuse_abandoning(graph, thread_id)
        todo: RunInput | Command[Any] | None = run_input
        if run_input is None:
            snapshot, _ = load_run(graph, thread_id)
            if not snapshot.values:
                raise ConfigError("thread id", f"no run {thread_id!r} is saved at {_where(checkpoint)}")
            if given is not None:
                todo = Command(resume=resume_value(snapshot.interrupts, *given))
            elif not resume_points(snapshot):
                print(f"run {thread_id} already finished; showing its result", file=sys.stderr)
        print(f"thread {thread_id}  (resume with: coe resume {thread_id})", file=sys.stderr)
        while True:  # a pending question without an answer is asked again by re-running its node
            try:
                with Progress(tokens=output.stream) as progress, _stop_models_on_signal():
                    modes: list[StreamMode] = ["custom", "messages"] if progress.wants_tokens else ["custom"]
                    chunks = graph.stream(todo, config, context=context, stream_mode=modes, durability="sync")
                    for mode, chunk in chunks:
                        lease.check()
                        if mode == "custom" and isinstance(chunk, dict):
                            progress.event(chunk)
                        elif mode == "messages" and isinstance(chunk, tuple):
                            message, meta = chunk
                            progress.token(meta, str(getattr(message, "content", "")))
            except KeyboardInterrupt:
                _settle_models()
                print(f"\ninterrupted; resume with: coe resume {thread_id}", file=sys.stderr)
                return EXIT_INTERRUPTED
            snapshot, _ = load_run(graph, thread_id)
            if not snapshot.interrupts:
                break
            if output.as_json or not sys.stdin.isatty():
                _settle_models()
                return _waiting(thread_id, snapshot.interrupts, output.as_json)
            todo = Command(resume=ask_in_terminal(snapshot.interrupts))
        state = Passport.model_validate(snapshot.values)
    _settle_models()
    return _report(state, output)


def _refuse_abandoning(graph: Any, thread_id: str) -> None:
    """Refuse a new task on a thread whose run waits for an answer or stopped half-way (it would be dropped).

    LangGraph starts a new input from the start and drops the pending question or the unfinished steps; the
    person is pointed at ``coe resume`` (or ``--abandon``, which the new run records).
    """
    from graph.persistence import load_run, resume_points

    snapshot, state = load_run(graph, thread_id)
    if state is None or state.refused is not None:
        return  # nothing saved, or an input the guard refused: nothing to lose
    abandon = "or run this task anyway with --abandon (that run is abandoned, and recorded)"
    if snapshot.interrupts:
        kinds = ", ".join(str(i.value.get("kind", "?")) for i in snapshot.interrupts if isinstance(i.value, dict))
        raise ConfigError(
            "--thread",
            f"thread {thread_id} is waiting for an answer ({kinds}): answer it with coe resume {thread_id} "
            f"--answer ..., {abandon}",
        )
    if resume_points(snapshot) and state.status != RunStatus.REJECTED:
        raise ConfigError(
            "--thread",
            f"thread {thread_id} has a run that stopped half-way: finish it with coe resume {thread_id}, {abandon}",
        )


def _settle_models() -> None:
    """Let a preload still loading finish before reporting and exiting (see ``ModelPool.settle``)."""
    from experts.pool.residency import pool

    pool().settle()


@contextlib.contextmanager
def _stop_models_on_signal() -> Iterator[None]:
    """On Ctrl+C or SIGTERM, stop every generation within a token and free the models, then interrupt as usual.

    Without this, the interrupt would wait in LangGraph for the running slot's node, which waits for the slot's
    generation to end. Stopped slots go back to pending (not failed), so ``coe resume`` runs them. SIGTERM (a
    service manager, ``kill``) is handled like Ctrl+C: exit 130, the resume hint, the thread's lease released.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        from experts.pool.residency import pool

        pool().shutdown()
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _waiting(thread_id: str, interrupts: Sequence[Interrupt], as_json: bool) -> int:
    from cli.answers import render

    for intr in interrupts:
        print(render(intr), file=sys.stderr)
    if as_json:
        pending = [{"id": i.id, **i.value} for i in interrupts if isinstance(i.value, dict)]
        print(json.dumps({"thread_id": thread_id, "status": "waiting", "interrupts": pending}, indent=2))
    print(f"waiting for an answer: coe resume {thread_id} --answer ...", file=sys.stderr)
    return EXIT_WAITING


def _report(state: Passport, output: Output) -> int:
    document = state.document or ""
    if output.ledger:
        from nodes.assemble import render_ledger

        document = document.rstrip("\n") + "\n\n" + render_ledger(state.ledger)
    out, as_json = output.out, output.as_json
    if out is not None:
        try:
            out.write_text(document, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                "--out",
                f"cannot write {out}: {exc.strerror or exc}; the run is saved: "
                f"coe resume {state.run.thread_id if state.run else 'THREAD_ID'} --out FILE writes it again",
            ) from None
        print(f"document written to {out}", file=sys.stderr)
    if output.out_dir is not None:
        _write_files(state, output.out_dir, document)
    if as_json:
        payload: dict[str, Any] = state.summary.model_dump(mode="json") if state.summary else {}
        payload["document"] = document
        print(json.dumps(payload, indent=2))
    elif out is None and output.out_dir is None:
        print(escaped(document) if sys.stdout.isatty() else document)  # a terminal replays no escape sequence
    if state.status == RunStatus.REJECTED:
        print("the plan was rejected; no expert ran", file=sys.stderr)
    return EXIT_OK if state.status == RunStatus.COMPLETED else EXIT_RUN


def _write_files(state: Passport, directory: Path, document: str | None = None) -> None:
    """Write the document as answer.md and every code slot's module and tests into ``directory``."""
    files = {"answer.md": document if document is not None else state.document or ""}
    if state.framework is not None:
        files.update(code_artifacts(state.framework, state.results))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (directory / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError("--out-dir", f"cannot write into {directory}: {exc.strerror or exc}") from None
    print(f"wrote {', '.join(files)} to {directory}", file=sys.stderr)


def _describe(state: Passport, next_nodes: list[str]) -> str:
    lines = [
        f"thread:  {state.run.thread_id if state.run else '?'}",
        f"status:  {state.status.value}" + (f" (next: {', '.join(next_nodes)})" if next_nodes else ""),
        f"task:    {state.mission.task if state.mission else str(state.task)}",
    ]
    for turn in state.turns:  # an earlier turn that never finished was abandoned by the next input
        unfinished = turn.status in (RunStatus.RUNNING, RunStatus.PENDING)
        lines.append(f"  turn {turn.number}: {'abandoned' if unfinished else turn.status.value:<10} {turn.task[:90]}")
    if state.turns:
        lines.append(f"  turn {len(state.turns) + 1}: (this run)")
    if state.scope is not None:
        moved = f"; follow-up, {state.scope.transition.replace('_', ' ')}" if state.scope.transition else ""
        lines.append(f"scope:   {state.scope.kind} ({state.scope.reason}{moved})")
    if state.adaptation is not None:
        a = state.adaptation
        if a.built_from == "aspects" or a.similarity is None:  # no template, or one that gave way to the aspects
            lines.append(f"plan:    {a.reason}")
        else:
            lines.append(f"template: {a.seed_id} (similarity {a.similarity:.3f}); {a.reason}")
    if state.framework is not None:
        lines.append(f"framework: {state.framework.title} ({state.framework.source})")
        for spec in state.framework.slots:
            st = state.slot_states.get(spec.id)
            status = st.status.value if st else "pending"
            extra = f" - {st.error}" if st and st.error else ""
            expert = st.expert if st and st.expert else "-"
            attempts = st.attempts if st else 0
            lines.append(f"  {spec.id:<16} {status:<12} {expert:<18} attempts={attempts}{extra}")
            decision = state.routing.get(spec.id)
            if decision is not None:
                model = decision.model or "base model"
                lines.append(f"  {'':<16} routed: {decision.reason}; model: {model} ({decision.binding})")
            result = state.results.get(spec.id)
            if result is not None and result.quality is not None:
                lines.append(f"  {'':<16} {_quality_line(result.quality)}")
    if state.completion is not None:  # the completion round: what it did, what is still missing
        c = state.completion
        acts = "; ".join(g.action() for g in c.planned)
        lines.append(f"completion: {c.decision}" + (f" ({acts})" if acts else ""))
        lines.extend(f"  still missing: {m}" for m in c.missing)
    for d in state.defaults:
        lines.append(f"default: {d.rule}" + (f" [{d.slot_id}]" if d.slot_id else "") + f": {d.detail}")
    for n in state.notices:
        lines.append(f"{n.level}: " + (f"[{n.slot_id}] " if n.slot_id else "") + n.message)
    return "\n".join(lines)


def _quality_line(quality: SlotQuality) -> str:
    """``delivers code (python); checks 14/15 passed (python.lint); kept c1 of 1``."""
    hard = [c for c in quality.checks if c.severity == "hard"]
    failed = [c.name for c in quality.checks if not c.passed]
    what = f"delivers {quality.deliverable}" + (f" ({quality.language})" if quality.language else "")
    checks = f"checks {sum(c.passed for c in quality.checks)}/{len(quality.checks)} passed"
    checks += f" (failed: {', '.join(failed)})" if failed else ""
    verdict = "" if all(c.passed for c in hard) else "; CAVEAT in the document"
    return f"{what}; {checks}; kept {quality.chosen} of {len(quality.candidates)}{verdict}"


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _where(checkpoint: str | None) -> str:
    from graph.persistence import resolve_url

    return resolve_url(checkpoint)


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


app.command("route")(route)
experts_app.command("status")(status)
app.add_typer(experts_app, name="experts")
app.add_typer(templates_app, name="templates")
app.add_typer(kb_app, name="kb")
app.add_typer(memory_app, name="memory")
app.command("feedback")(feedback)
app.command("prune")(prune)


def main() -> None:
    """Entry point for ``python -m cli``."""
    app()
