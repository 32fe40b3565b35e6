"""Assist protocol benchmark: lookup threshold calibration, resolution quality, lookup latency, model behaviour.

Parts (``--parts``, default all but ``model``):

* ``calibrate``: the labelled lookup requests of ``bench/data/assist_lookup_calibration.yaml`` against the
  knowledge base of ``tests/fixtures/kb``; every threshold from 0.30 to 0.90 is scored (correct fills, wrong
  fills, fills of unanswerable requests); the chosen threshold is the lowest with no false fill at all.
* ``slots``: the held-out slot outputs of ``bench/data/assist_slots.yaml`` (>= 30 slots, every placeholder type,
  answerable, unanswerable and circular requests) resolved by the real resolver (real router and knowledge
  base, scripted expert consults) at the chosen threshold: share resolved with a source, share correctly
  left unresolved, false fills and fills without a source (must be 0).
* ``latency``: lookup latency over a synthetic knowledge base of ``--chunks`` passages (default 10,000),
  indexed through ``experts.knowledge.add_documents``: p50/p90 of a full lookup (query embedding, FAISS search,
  sentence re-ranking) and of the FAISS search alone.
* ``model``: how often the default model writes placeholders when asked for facts it cannot know, through the
  real slot prompt (with the uncertainty protocol), with the outline grammar (which allows the placeholder
  syntax in any text line) and without a grammar.

``--quick``: calibrate, slots, and latency over 300 passages and 5 queries (no model).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import RESULTS_DIR as RESULTS
from bench.common import bench_parser, md_table, percentile, write_results
from engine.assists.resolver import AssistResolver
from experts.backends.fake import FakeBackend, FakeRule, FakeScript
from experts.knowledge import KnowledgeBase, add_documents, load_kb
from state.assist import scan_assists
from state.context import resolve_settings
from state.outline import parse_output

ROOT = Path(__file__).resolve().parents[1]
KB_DOCS = ROOT / "tests" / "fixtures" / "kb"
DATA = ROOT / "bench" / "data"
GRID = [round(0.30 + 0.01 * i, 2) for i in range(61)]
PARTS = {"calibrate": "calibration", "slots": "slots", "latency": "latency", "model": "model"}


def build_fixture_kb(directory: Path) -> KnowledgeBase:
    add_documents([KB_DOCS], directory)
    return load_kb(directory)


# --- calibration -------------------------------------------------------------------------------------------


def calibrate(kb: KnowledgeBase) -> dict[str, Any]:
    data = yaml.safe_load((DATA / "assist_lookup_calibration.yaml").read_text(encoding="utf-8"))
    items = [(d["q"], d["answer"]) for d in data["answerable"] + data["unanswerable"]]
    rows = []
    for q, answer in items:
        found = kb.best_quote(q)
        assert found is not None
        hit, quote = found
        right = answer is not None and answer.lower() in quote.text.lower()
        rows.append({"q": q, "answer": answer, "score": quote.score, "quote": quote.text, "right_passage": right})
    n_ans = sum(1 for r in rows if r["answer"] is not None)
    n_un = len(rows) - n_ans
    sweep = []
    for t in GRID:
        filled = [r for r in rows if r["score"] >= t]
        correct = sum(1 for r in filled if r["right_passage"])
        wrong = sum(1 for r in filled if r["answer"] is not None and not r["right_passage"])
        unanswerable = sum(1 for r in filled if r["answer"] is None)
        sweep.append({"threshold": t, "correct": correct, "wrong_passage": wrong, "filled_unanswerable": unanswerable})
    safe = [s for s in sweep if s["wrong_passage"] + s["filled_unanswerable"] == 0]
    chosen = min(safe, key=lambda s: s["threshold"]) if safe else sweep[-1]
    return {
        "answerable": n_ans,
        "unanswerable": n_un,
        "chosen_threshold": chosen["threshold"],
        "recall_at_chosen": round(chosen["correct"] / n_ans, 3),
        "sweep": sweep,
        "rows": rows,
    }


# --- held-out slot outputs -----------------------------------------------------------------------------------


def run_slots(kb: KnowledgeBase, threshold: float) -> dict[str, Any]:
    data = yaml.safe_load((DATA / "assist_slots.yaml").read_text(encoding="utf-8"))
    rules = [FakeRule(title=c["match"], text=c["text"]) for c in data["consults"]]
    backend = FakeBackend(script=FakeScript(rules=rules, default={"text": "UNKNOWN"}))  # type: ignore[arg-type]
    settings = resolve_settings({"backend": "fake", "lookup_threshold": threshold}, env={})
    resolver = AssistResolver(settings, kb=lambda: kb, backend_for=lambda _e: backend)
    outcomes: list[dict[str, Any]] = []
    seconds: list[float] = []
    for slot in data["slots"]:
        titles = ["Context", "Details", "Open points"]
        text = "## Outline\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(titles, 1)) + "\n\n"
        text += "\n\n".join(
            f"## {i}. {t}\n{line}" for i, (t, line) in enumerate(zip(titles, slot["lines"], strict=True), 1)
        )
        result = parse_output(text + "\n", slot["id"], slot["expert"])
        placeholders = scan_assists(result.raw).placeholders
        if len(placeholders) != len(slot["expect"]):
            raise SystemExit(f"{slot['id']}: {len(placeholders)} placeholders but {len(slot['expect'])} labels")
        t0 = time.perf_counter()
        res = resolver.resolve(result)
        seconds.append(time.perf_counter() - t0)
        by_key = {(r.kind, (r.domain or "").casefold(), r.description.casefold()): r for r in res.records}
        leftover = scan_assists(res.result.raw).placeholders
        for ph, expect in zip(placeholders, slot["expect"], strict=True):
            rec = by_key[ph.key]
            want_resolved = expect.startswith("resolved")
            phrase = expect.split(":", 1)[1].strip() if want_resolved else None
            filled = rec.status == "resolved"
            outcomes.append(
                {
                    "slot": slot["id"],
                    "kind": ph.kind,
                    "description": ph.description,
                    "expected": expect,
                    "status": rec.status,
                    "correct_content": filled and phrase is not None and phrase.lower() in (rec.value or "").lower(),
                    "sources": [s.cite() for s in rec.sources],
                    "reason": rec.reason,
                    "value": rec.value,
                    "no_source": filled and not rec.sources,
                    "want_resolved": want_resolved,
                    "circular": rec.reason == "circular reference" or any("cycle cut" in t for t in rec.trail),
                }
            )
        if leftover:
            raise SystemExit(f"{slot['id']}: placeholders left in the text: {[p.raw for p in leftover]}")
    want = [o for o in outcomes if o["want_resolved"]]
    unwanted = [o for o in outcomes if not o["want_resolved"]]
    kinds = sorted({o["kind"] for o in outcomes})
    per_kind = {
        k: {
            "placeholders": sum(1 for o in outcomes if o["kind"] == k),
            "expected_resolved": sum(1 for o in want if o["kind"] == k),
            "resolved_correctly": sum(1 for o in want if o["kind"] == k and o["correct_content"]),
            "expected_unresolved": sum(1 for o in unwanted if o["kind"] == k),
            "left_unresolved": sum(1 for o in unwanted if o["kind"] == k and o["status"] == "unresolved"),
        }
        for k in kinds
    }
    return {
        "slots": len(data["slots"]),
        "placeholders": len(outcomes),
        "threshold": threshold,
        "expected_resolved": len(want),
        "resolved_with_source_correct": sum(1 for o in want if o["correct_content"] and o["sources"]),
        "share_resolved_with_source": round(sum(1 for o in want if o["correct_content"]) / len(want), 3),
        "expected_unresolved": len(unwanted),
        "correctly_unresolved": sum(1 for o in unwanted if o["status"] == "unresolved"),
        "share_correctly_unresolved": round(sum(1 for o in unwanted if o["status"] == "unresolved") / len(unwanted), 3),
        "false_fills": sum(1 for o in unwanted if o["status"] == "resolved")
        + sum(1 for o in want if o["status"] == "resolved" and not o["correct_content"]),
        "filled_without_source": sum(1 for o in outcomes if o["no_source"]),
        "circular_cut": sum(1 for o in outcomes if o["circular"]),
        "per_kind": per_kind,
        "resolve_ms_per_slot_p50": round(statistics.median(seconds) * 1000, 1),
        "outcomes": outcomes,
    }


# --- latency ---------------------------------------------------------------------------------------------------

_SYSTEMS = [
    "billing",
    "scheduling",
    "pharmacy",
    "imaging",
    "laboratory",
    "portal",
    "messaging",
    "records",
    "identity",
    "payments",
    "inventory",
    "reporting",
    "triage",
    "referrals",
    "insurance",
    "telehealth",
]
_ASPECTS = [
    "timeout",
    "retention period",
    "batch size",
    "retry limit",
    "queue depth",
    "cache lifetime",
    "replica count",
    "rate limit",
    "backup interval",
    "alert threshold",
    "page size",
    "pool size",
]
_UNITS = ["seconds", "minutes", "hours", "days", "items", "requests", "connections", "percent"]
_ENVS = ["production", "staging", "the training environment", "the disaster recovery site", "the test cluster"]


def _synthetic_docs(directory: Path, n_chunks: int, rng: random.Random) -> None:
    """Markdown documents with one short section (one passage) per fact."""
    per_doc = 25
    for d in range((n_chunks + per_doc - 1) // per_doc):
        lines = [f"# Operations handbook volume {d}\n"]
        for s in range(min(per_doc, n_chunks - d * per_doc)):
            system, aspect, env = rng.choice(_SYSTEMS), rng.choice(_ASPECTS), rng.choice(_ENVS)
            value, unit = rng.randint(1, 999), rng.choice(_UNITS)
            lines.append(
                f"## {system.title()} {aspect} ({d}.{s})\n\nIn {env}, the {system} service uses a {aspect} of "
                f"{value} {unit}. The value was set by the {rng.choice(_SYSTEMS)} team after review {d * 100 + s}. "
                f"Changes to it need a ticket and a note in the {system} runbook.\n"
            )
        (directory / f"handbook_{d:04d}.md").write_text("\n".join(lines), encoding="utf-8")


def latency(n_chunks: int, queries: int) -> dict[str, Any]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        _synthetic_docs(docs, n_chunks, rng)
        t0 = time.perf_counter()
        report = add_documents([docs], Path(tmp) / "kb")
        index_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        kb = load_kb(Path(tmp) / "kb")
        load_s = time.perf_counter() - t0
        asks = [
            f"{rng.choice(_ASPECTS)} of the {rng.choice(_SYSTEMS)} service in {rng.choice(_ENVS)}"
            for _ in range(queries)
        ]
        kb.best_quote(asks[0])  # warm-up
        full, search = [], []
        assert kb.embedder is not None
        for q in asks:
            t0 = time.perf_counter()
            kb.best_quote(q)
            full.append(time.perf_counter() - t0)
            vec = kb.embedder.encode([q])
            t0 = time.perf_counter()
            kb.search_vectors(vec, 5)
            search.append(time.perf_counter() - t0)
        return {
            "chunks": len(kb.chunks),
            "documents": len(report.added),
            "index_type": type(kb.faiss_index).__name__,
            "index_seconds": round(index_s, 1),
            "passages_per_second": round(len(kb.chunks) / index_s, 1),
            "load_seconds": round(load_s, 3),
            "queries": queries,
            "lookup_ms_p50": round(percentile([x * 1000 for x in full], 50), 2),
            "lookup_ms_p90": round(percentile([x * 1000 for x in full], 90), 2),
            "faiss_search_ms_p50": round(percentile([x * 1000 for x in search], 50), 3),
        }


# --- model behaviour --------------------------------------------------------------------------------------------

MODEL_TASKS = [
    (
        "Database connection settings",
        "Write the connection settings our billing service must use for our production database.",
    ),
    ("Deployment target", "Describe how to deploy our app to our company's Kubernetes cluster and namespace."),
    ("Internal contacts", "List who in our organisation approves production access and how to reach them."),
    ("Retention rules", "State our company's retention period for application logs and audit logs."),
    (
        "Contract clause",
        "Cite the Delaware statute that limits our liability in the vendor contract, with its section number.",
    ),
    ("Budget", "Give the approved cloud budget of our team for next year, per month."),
    ("Password policy", "State our organisation's minimum password length and rotation rules."),
    ("API limits", "Give the rate limit and maximum page size of our internal patient API."),
    ("On-call", "Explain our on-call rota: who is on call this week and the escalation phone number."),
    ("Backup schedule", "Give the exact schedule and retention of our production database backups."),
    ("Hotel policy", "State our travel policy's nightly hotel limit in Europe and who approves exceptions."),
    ("Legacy system", "Describe the version and host name of our legacy mainframe and how to connect to it."),
]


def model_emission(max_tokens: int, limit: int) -> dict[str, Any]:
    from engine.slots.prompt import SlotJob, build_messages
    from experts.backends.grammar import OUTLINE_GRAMMAR
    from experts.backends.protocol import GenerationRequest
    from experts.catalog import load_catalog
    from experts.pool.pooled import get_backend
    from state.framework import SlotSpec

    settings = resolve_settings({"max_tokens": max_tokens})  # COE_N_THREADS etc. from the environment
    backend = get_backend(settings)
    persona = load_catalog().get("general_reasoning").persona
    runs: list[dict[str, Any]] = []
    for grammar_on in (True, False):
        for title, task in MODEL_TASKS[:limit]:
            job = SlotJob(
                spec=SlotSpec(id="answer", title=title, description=task),
                task=task,
                constraints=(),
                expert="general_reasoning",
                persona=persona,
                references={},
                max_tokens=max_tokens,
                temperature=0.0,
            )
            t0 = time.perf_counter()
            gen = backend.generate(
                GenerationRequest(
                    messages=build_messages(job, settings),
                    max_tokens=max_tokens,
                    grammar=OUTLINE_GRAMMAR if grammar_on else None,
                    slot_id="answer",
                    slot_title=title,
                )
            )
            scan = scan_assists(gen.text)
            runs.append(
                {
                    "grammar": grammar_on,
                    "task": title,
                    "placeholders": len(scan.placeholders),
                    "kinds": [p.kind for p in scan.placeholders],
                    "malformed": len(scan.malformed),
                    "braces": gen.text.count("{{"),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "text": gen.text,
                }
            )
            print(f"  grammar={grammar_on} {title}: {len(scan.placeholders)} placeholders", file=sys.stderr)
    summary = {}
    for grammar_on in (True, False):
        mine = [r for r in runs if r["grammar"] is grammar_on]
        summary["with_grammar" if grammar_on else "without_grammar"] = {
            "prompts": len(mine),
            "with_placeholder": sum(1 for r in mine if r["placeholders"]),
            "placeholders": sum(r["placeholders"] for r in mine),
            "malformed": sum(r["malformed"] for r in mine),
        }
    return {
        "max_tokens": max_tokens,
        "model": settings.model_path or "default (qwen2.5-coder-0.5b)",
        "summary": summary,
        "runs": runs,
    }


# --- main ----------------------------------------------------------------------------------------------------------


def md_calibration(cal: dict[str, Any]) -> str:
    shown = [
        s for s in cal["sweep"] if round(s["threshold"] * 100) % 5 == 0 or s["threshold"] == cal["chosen_threshold"]
    ]
    rows = [
        [
            s["threshold"],
            f"{s['correct']}/{cal['answerable']}",
            s["wrong_passage"],
            f"{s['filled_unanswerable']}/{cal['unanswerable']}",
        ]
        for s in shown
    ]
    return (
        "## Lookup threshold calibration\n\n"
        f"{cal['answerable']} answerable and {cal['unanswerable']} unanswerable requests (off-topic and near misses) "
        f"against tests/fixtures/kb ({cal.get('passages', '?')} passages). Score: cosine similarity of the best "
        "sentence among the 5 best passages. Chosen: the lowest threshold with no false fill, "
        f"**{cal['chosen_threshold']}** (recall {cal['recall_at_chosen']:.0%}).\n\n"
        + md_table(["threshold", "correct fills", "wrong passage", "unanswerable filled"], rows)
    )


def md_slots(res: dict[str, Any]) -> str:
    rows = [
        [
            "resolved with a source (and the right content), of the resolvable",
            f"{res['resolved_with_source_correct']}/{res['expected_resolved']} "
            f"({res['share_resolved_with_source']:.0%})",
        ],
        [
            "correctly left unresolved, of the unresolvable",
            f"{res['correctly_unresolved']}/{res['expected_unresolved']} ({res['share_correctly_unresolved']:.0%})",
        ],
        ["false fills (filled when it should not be, or with the wrong content)", res["false_fills"]],
        ["filled without a source", res["filled_without_source"]],
        ["cycles cut (circular reference)", res["circular_cut"]],
        ["resolution time per slot, p50 (ms)", res["resolve_ms_per_slot_p50"]],
    ]
    kinds = [
        [
            k,
            v["placeholders"],
            f"{v['resolved_correctly']}/{v['expected_resolved']}",
            f"{v['left_unresolved']}/{v['expected_unresolved']}",
        ]
        for k, v in res["per_kind"].items()
    ]
    out = [
        "## Held-out slot outputs\n",
        f"{res['slots']} slot outputs, {res['placeholders']} placeholders, threshold {res['threshold']}; expert "
        "consults scripted (fake backend), routed by the real router.\n",
        md_table(["measure", "value"], rows),
        "",
        md_table(["kind", "placeholders", "resolved correctly / expected", "left unresolved / expected"], kinds),
    ]
    misses = [
        o
        for o in res["outcomes"]
        if o["want_resolved"] != (o["status"] == "resolved") or (o["want_resolved"] and not o["correct_content"])
    ]
    if misses:
        out.append("\nDisagreements with the labels:\n")
        out.extend(
            f'- {o["slot"]} {o["kind"]} "{o["description"]}": expected {o["expected"]}, got {o["status"]} '
            f"({o['reason'] or o['value']})"
            for o in misses
        )
    return "\n".join(out)


def md_latency(lat: dict[str, Any]) -> str:
    return "## Lookup latency\n\n" + md_table(["measure", "value"], [[k, v] for k, v in lat.items()])


def md_model(mod: dict[str, Any]) -> str:
    rows = [
        [k.replace("_", " "), f"{v['with_placeholder']}/{v['prompts']}", v["placeholders"], v["malformed"]]
        for k, v in mod["summary"].items()
    ]
    n = mod["summary"]["with_grammar"]["prompts"]
    return (
        "## Placeholders written by the default model\n\n"
        f"{n} tasks that need facts only the organisation has, through the real slot prompt (uncertainty protocol "
        f"included), general_reasoning persona, greedy, max_tokens {mod['max_tokens']}; the outline grammar allows "
        "placeholders in any text line.\n\n"
        + md_table(["decoding", "answers with >= 1 placeholder", "placeholders", "malformed"], rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--parts", default="calibrate,slots,latency", help="calibrate,slots,latency,model")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--model-prompts", type=int, default=12)
    parser.add_argument("--model-max-tokens", type=int, default=300)
    args = parser.parse_args(argv)
    if args.quick:
        args.parts, args.chunks, args.queries = "calibrate,slots,latency", 300, 5
    parts = set(args.parts.split(","))
    previous: dict[str, Any] = {}
    old = (args.out or RESULTS) / "assist.json"
    if old.exists():  # parts not run this time keep their last results (each part records when it ran)
        last = json.loads(old.read_text(encoding="utf-8"))
        previous = {
            k: {"ran_at": last.get("timestamp"), **v}
            for k, v in last.items()
            if k in PARTS.values() and isinstance(v, dict)
        }
    payload: dict[str, Any] = dict(previous)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        kb = build_fixture_kb(Path(tmp) / "kb") if parts & {"calibrate", "slots"} else None
        if "calibrate" in parts and kb is not None:
            payload["calibration"] = {**calibrate(kb), "passages": len(kb.chunks), "ran_at": stamp}
            cal = payload["calibration"]
            print(f"calibration: threshold {cal['chosen_threshold']}, recall {cal['recall_at_chosen']:.0%}")
        if "slots" in parts and kb is not None:
            threshold = resolve_settings({}, env={}).lookup_threshold  # the default the harness ships with
            res = payload["slots"] = {**run_slots(kb, threshold), "ran_at": stamp}
            print(
                f"slots: resolved {res['share_resolved_with_source']:.0%}, correctly unresolved "
                f"{res['share_correctly_unresolved']:.0%}, false fills {res['false_fills']}, "
                f"without source {res['filled_without_source']}"
            )
    if "latency" in parts:
        lat = payload["latency"] = {**latency(args.chunks, args.queries), "ran_at": stamp}
        print(f"latency: {lat['chunks']} passages, lookup p50 {lat['lookup_ms_p50']} ms")
    if "model" in parts:
        mod = payload["model"] = {**model_emission(args.model_max_tokens, args.model_prompts), "ran_at": stamp}
        print(f"model: {mod['summary']}")
    renderers = {"calibration": md_calibration, "slots": md_slots, "latency": md_latency, "model": md_model}
    md = [
        renderers[key](payload[key]) + f"\n\n(run at {payload[key].get('ran_at', '?')})"
        for key in renderers
        if key in payload
    ]
    write_results("assist", payload, "\n\n".join(md), directory=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
