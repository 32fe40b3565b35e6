"""The dual-embedding router: scoring rules on a small synthetic catalog, the index cache, the real catalog."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import experts.routing.index
from experts.catalog import Catalog, load_catalog
from experts.embedding import VectorInvariantError
from experts.routing.index import ExpertIndex, load_or_build_index
from experts.routing.lexical import LexicalProbe
from experts.routing.router import (
    ExpertRouter,
    FastStage,
    RouterParams,
    get_router,
    instruction_head,
    routing_text,
)
from state.errors import ConfigError

AXES = ("code", "medical", "legal", "misc")


class KeywordEmbedder:
    """A tiny deterministic embedder: one axis per keyword, counts normalised."""

    model_id = "keyword-test:4d"
    dim = 4
    backend = "test"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        rows = []
        for text in texts:
            words = text.lower().split()
            vec = np.array([words.count(a) for a in AXES], dtype=np.float32) + np.float32(1e-3)
            rows.append(vec / np.linalg.norm(vec))
        return np.array(rows, dtype=np.float32).reshape(len(texts), 4)


def _scope(expert_id: str, kind: str, caps: list[str], excs: list[str]) -> dict[str, object]:
    return {
        "id": expert_id,
        "display_name": expert_id,
        "kind": kind,
        "summary": f"{expert_id} test expert",
        "capability_scope": "\n".join(caps),
        "exclusion_scope": "\n".join(excs),
        "harness_constraints": f"You are {expert_id}. This requires [X] expertise, not {expert_id} expertise.",
        "known_weaknesses": ["it is a test"],
        "model": {"binding": "faux"},
        "verification": {"date": "2026-11-22", "method": "test"},
    }


def write_catalog(directory: Path, medical_caps: int = 5) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    scopes = [
        _scope("python_coder", "task", ["code code"] * 5, ["legal text"]),
        _scope("medical_clinical", "domain", ["medical medical"] * medical_caps, ["code for medical data"]),
        _scope("legal_drafting", "domain", ["legal legal"] * 5, ["code code"]),
        _scope("general_reasoning", "general", ["misc", "misc misc", "misc code", "misc legal", "misc medical"], ["x"]),
    ]
    for scope in scopes:
        (directory / f"{scope['id']}.yaml").write_text(yaml.safe_dump(scope), encoding="utf-8")
    index = {
        "version": 1,
        "default_expert": "general_reasoning",
        "experts": [{"id": s["id"], "file": f"{s['id']}.yaml"} for s in scopes],
    }
    (directory / "index.yaml").write_text(yaml.safe_dump(index), encoding="utf-8")
    return directory


@pytest.fixture
def small(tmp_path: Path) -> tuple[Catalog, KeywordEmbedder, Path]:
    return load_catalog(write_catalog(tmp_path / "scopes")), KeywordEmbedder(), tmp_path / "cache"


def _router(small: tuple[Catalog, KeywordEmbedder, Path], **params: float) -> ExpertRouter:
    catalog, embedder, cache = small
    index = load_or_build_index(catalog, embedder, cache)
    return ExpertRouter(catalog, embedder, index, RouterParams(**params))  # type: ignore[arg-type]


def test_net_score_is_capability_minus_lambda_times_exclusion(small) -> None:  # type: ignore[no-untyped-def]
    router = _router(small, lam=0.5, threshold=-1.0, tie_margin=0.0)
    result = router.route("code medical")
    for expert_id, net in result.scores.items():
        expected = result.capability[expert_id] - 0.5 * result.exclusion[expert_id]
        assert net == pytest.approx(expected, abs=1e-3)
    assert list(result.scores) == sorted(result.scores, key=lambda e: -result.scores[e])
    # The exclusion "code for medical data" pulls medical_clinical down for code about medical data.
    assert result.exclusion["medical_clinical"] > result.exclusion["python_coder"]


def test_tie_rule_prefers_the_task_type_specialist(small) -> None:  # type: ignore[no-untyped-def]
    text = "medical medical medical code code"  # medical leads code by a small margin at lambda 0
    plain = _router(small, lam=0.0, threshold=-1.0, tie_margin=0.0).route(text)
    assert plain.expert == "medical_clinical" and plain.rule is None
    gap = plain.scores["medical_clinical"] - plain.scores["python_coder"]
    assert 0 < gap < 0.3
    tied = _router(small, lam=0.0, threshold=-1.0, tie_margin=0.3).route(text)
    assert tied.expert == "python_coder" and tied.rule == "tie_prefers_task_type"
    assert tied.raw_best == "medical_clinical" and tied.runner_up == "medical_clinical"
    assert "tie rule: task-type specialist preferred over medical_clinical" in tied.explain()
    # A clear win is not a tie.
    clear = _router(small, lam=0.0, threshold=-1.0, tie_margin=0.3).route("medical")
    assert clear.expert == "medical_clinical" and clear.rule is None


def test_low_confidence_goes_to_the_generalist(small) -> None:  # type: ignore[no-untyped-def]
    router = _router(small, lam=0.0, threshold=0.9, tie_margin=0.0)
    result = router.route("legal code medical")
    assert result.expert == "general_reasoning" and result.fallback and result.rule == "low_confidence"
    assert result.raw_best != "general_reasoning"
    assert "low confidence: best was" in result.explain()
    confident = router.route("legal")
    assert confident.expert == "legal_drafting" and not confident.fallback


def test_batch_routing_embeds_once_and_matches_single_routing(small) -> None:  # type: ignore[no-untyped-def]
    router = _router(small, lam=0.3, threshold=-1.0, tie_margin=0.0)
    embedder = small[1]
    before = embedder.calls
    texts = ["code", "legal legal", "medical", "misc"]
    batch = router.route_many(texts)
    assert embedder.calls == before + 1
    assert [r.expert for r in batch] == [router.route(t).expert for t in texts]
    with pytest.raises(ConfigError, match="texts\\[1\\]"):
        router.route_many(["code", "  "])


def test_router_refuses_vectors_and_indexes_that_break_invariants(small) -> None:  # type: ignore[no-untyped-def]
    router = _router(small, lam=0.3, threshold=-1.0, tie_margin=0.0)
    with pytest.raises(VectorInvariantError, match="router query vectors: vectors have dimension 3"):
        router.route_vectors(np.ones((1, 3), dtype=np.float32), ["code"])
    with pytest.raises(VectorInvariantError, match="L2 norm"):
        router.route_vectors(np.ones((1, 4), dtype=np.float32), ["code"])
    with pytest.raises(ConfigError, match="1 vectors for 2 texts"):
        router.route_vectors(np.eye(4, dtype=np.float32)[:1], ["code", "legal"])

    class Other(KeywordEmbedder):
        model_id = "another-model:4d"

    with pytest.raises(ConfigError, match="the same model must embed index and query"):
        ExpertRouter(small[0], Other(), router.index, RouterParams())


class StaticKeywordEmbedder(KeywordEmbedder):
    """The first stage's stand-in: the same keyword axes, another model (its own index)."""

    model_id = "keyword-static:4d"


def _two_stage(
    small: tuple[Catalog, KeywordEmbedder, Path], fast_gap: float = 0.5
) -> tuple[ExpertRouter, StaticKeywordEmbedder, list[int]]:
    catalog, embedder, cache = small
    static = StaticKeywordEmbedder()
    builds: list[int] = []

    encoder_index = load_or_build_index(catalog, embedder, cache)

    def build() -> ExpertRouter:
        builds.append(1)
        index = load_or_build_index(catalog, static, cache, part="static", probe=encoder_index.probe)
        return ExpertRouter(catalog, static, index, RouterParams())

    params = RouterParams(lam=0.0, threshold=-1.0, tie_margin=0.0, fast_gap=fast_gap)
    router = ExpertRouter(catalog, embedder, encoder_index, params, FastStage(build))
    return router, static, builds


def test_the_static_stage_decides_clear_texts_and_the_encoder_the_rest(small) -> None:  # type: ignore[no-untyped-def]
    router, static, builds = _two_stage(small)
    encoder = small[1]
    texts = ["legal legal legal", "medical medical medical code code", "code code"]
    before = encoder.calls
    results = router.route_many(texts)
    assert builds == [1] and static.calls >= 1
    assert [r.stage for r in results] == ["static", "encoder", "static"]
    assert encoder.calls == before + 1  # one batch, with only the close call in it
    assert [r.expert for r in results] == ["legal_drafting", "medical_clinical", "python_coder"]
    assert results[0].gap >= 0.5 > results[1].gap
    assert "decided by the static first stage" in results[0].explain()
    assert results[0].to_json()["stage"] == "static" and results[1].to_json()["stage"] == "encoder"
    # Same decisions as the encoder alone on these texts; the first stage is built once and shared.
    alone = router.with_params(dataclasses.replace(router.params, fast_gap=1.0))
    assert [r.expert for r in alone.route_many(texts)] == [r.expert for r in results]
    router.with_params(dataclasses.replace(router.params, lam=0.1)).route("code")
    assert builds == [1]


def test_the_static_stage_defers_when_the_instruction_head_disagrees(small) -> None:  # type: ignore[no-untyped-def]
    router, _, _ = _two_stage(small, fast_gap=0.05)
    first = router.first_stage()
    assert first is not None
    text = "legal legal legal about code code code code code code code"  # the head says legal, the words code
    assert instruction_head(text) == "legal legal legal"
    alone, head = first.route(text), first.route("legal legal legal")
    assert alone.expert == "python_coder" and alone.gap >= 0.05 and head.expert == "legal_drafting"
    assert not router.decisive(alone, head) and router.decisive(alone)
    assert router.route(text).stage == "encoder"
    agreeing = "code code code about legal legal code code"
    assert instruction_head(agreeing) == "code code code" and router.route(agreeing).stage == "static"


def test_fast_gap_one_turns_the_first_stage_off_without_building_it(small) -> None:  # type: ignore[no-untyped-def]
    router, static, builds = _two_stage(small, fast_gap=1.0)
    assert [r.stage for r in router.route_many(["legal legal", "code"])] == ["encoder", "encoder"]
    assert builds == [] and static.calls == 0 and router.first_stage() is None


def test_a_first_stage_fallback_or_tie_goes_to_the_encoder(small) -> None:  # type: ignore[no-untyped-def]
    router, _, _ = _two_stage(small, fast_gap=0.0)
    low = router.with_params(dataclasses.replace(router.params, threshold=0.99)).route("legal code medical")
    assert low.stage == "encoder" and low.fallback
    tied = router.with_params(dataclasses.replace(router.params, tie_margin=0.3)).route(
        "medical medical medical code code"
    )
    assert tied.stage == "encoder" and tied.rule == "tie_prefers_task_type"


def test_a_first_stage_that_cannot_be_built_is_logged_and_skipped(  # type: ignore[no-untyped-def]
    small, caplog: pytest.LogCaptureFixture
) -> None:
    catalog, embedder, cache = small

    def broken() -> ExpertRouter:
        raise ConfigError("static token table", "distilling gave non-finite values")

    router = ExpertRouter(
        catalog, embedder, load_or_build_index(catalog, embedder, cache), RouterParams(fast_gap=0.0), FastStage(broken)
    )
    with caplog.at_level(logging.WARNING, logger="experts.routing.router"):
        assert router.route("legal legal").stage == "encoder"
        assert router.route("code").stage == "encoder"
    assert caplog.text.count("the router's static first stage is off") == 1


def test_both_stages_keep_their_own_index_cache(small) -> None:  # type: ignore[no-untyped-def]
    catalog, embedder, cache = small
    router, static, _ = _two_stage(small)
    router.route("legal legal")
    # Reloading either index must not rebuild it: one directory holds one index, so the first stage has its own.
    assert load_or_build_index(catalog, embedder, cache).built is False
    assert load_or_build_index(catalog, static, cache, part="static").built is False
    assert (cache / "static" / "metadata.json").is_file()


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("Draft the text message we send them", "Write the text message we send them"),
        ("Please draft three launch emails", "Please write three launch emails"),
        ("Drafting an NDA for a freelancer", "Writing an NDA for a freelancer"),  # the object still says legal
        ("Improve the first draft of my essay", "Improve the first draft of my essay"),  # the noun stays
    ],
)
def test_draft_as_a_verb_reads_write(text: str, read: str) -> None:
    assert routing_text(text) == read


def test_a_drafted_email_is_not_legal_work_and_a_drafted_clause_is() -> None:
    router = get_router()
    assert router.route("Draft the text message we send our loyal customers").expert != "legal_drafting"
    assert router.route("Draft a confidentiality clause for a freelance design contract").expert == "legal_drafting"


def test_router_params_are_range_checked() -> None:
    with pytest.raises(ConfigError, match="lam"):
        RouterParams(lam=-1.0)
    with pytest.raises(ConfigError, match="cap_top_k"):
        RouterParams(cap_top_k=0)
    with pytest.raises(ConfigError, match="fast_gap"):
        RouterParams(fast_gap=1.5)


def test_index_cache_is_reused_and_rebuilt_when_a_scope_changes(tmp_path: Path) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    cache = tmp_path / "cache"
    embedder = KeywordEmbedder()
    first = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert first.built and (cache / "metadata.json").is_file()
    files = {p.name for p in cache.iterdir()}
    assert {"capability_vectors.npy", "exclusion_vectors.npy", "capability.index", "exclusion.index"} <= files
    assert {"lines.json", "expert_ids.json"} <= files
    meta = json.loads((cache / "metadata.json").read_text())
    assert meta["model_id"] == "keyword-test:4d" and meta["dim"] == 4 and meta["counts"]["capability"] == 20

    second = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert not second.built and second.content_hash == first.content_hash

    write_catalog(scopes, medical_caps=6)  # one more capability line
    third = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert third.built and third.content_hash != first.content_hash
    assert json.loads((cache / "metadata.json").read_text())["counts"]["capability"] == 21

    class Other(KeywordEmbedder):
        model_id = "another-model:4d"

    assert load_or_build_index(load_catalog(scopes), Other(), cache).built  # another model: rebuilt


def test_switching_to_the_int8_encoder_rebuilds_the_index(small) -> None:  # type: ignore[no-untyped-def]
    from experts.embedding import get_embedder

    catalog, _, cache = small
    float32, int8 = get_embedder("onnx"), get_embedder("onnx-int8")
    first = load_or_build_index(catalog, float32, cache)
    assert load_or_build_index(catalog, float32, cache).built is False
    switched = load_or_build_index(catalog, int8, cache)
    assert switched.built is True and switched.model_id == int8.model_id != first.model_id
    assert switched.content_hash != first.content_hash
    with pytest.raises(ConfigError, match="the same model must embed index and query"):
        ExpertRouter(catalog, float32, switched, RouterParams())


def test_a_damaged_cache_is_rebuilt_not_trusted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    cache = tmp_path / "cache"
    catalog, embedder = load_catalog(scopes), KeywordEmbedder()
    load_or_build_index(catalog, embedder, cache)
    np.save(cache / "capability_vectors.npy", np.full((20, 4), 3.0, dtype=np.float32))
    rebuilt = load_or_build_index(catalog, embedder, cache)
    assert rebuilt.built and "damaged" in caplog.text
    (cache / "lines.json").write_text("not json")
    assert load_or_build_index(catalog, embedder, cache).built
    assert not load_or_build_index(catalog, embedder, cache).built


# --- the shipped catalog with the real embedder ---------------------------------------------------------


HIPAA = [
    ("analysis", "Write a Python script that loads the exported medical records and computes readmission rates"),
    ("query", "Write the SQL query that selects the patients' visits from the HIPAA-compliant PostgreSQL database"),
    ("safeguards", "Design the security controls (encryption, access control, audit logging) for handling the records"),
    ("disclaimer", "Draft a Delaware-jurisdiction legal disclaimer for the medical-records analysis tool"),
]


def test_hipaa_slots_go_to_the_experts_whose_work_they_are() -> None:
    results = get_router().route_many([text for _, text in HIPAA])
    got = {slot: r.expert for (slot, _), r in zip(HIPAA, results, strict=True)}
    assert got == {
        "analysis": "python_coder",
        "query": "sql_specialist",
        "safeguards": "security_architect",
        "disclaimer": "legal_drafting",
    }
    assert all(r.expert != "medical_clinical" for r in results)


def test_unrelated_chatter_falls_back_to_the_generalist() -> None:
    result = get_router().route("Plan a birthday party for my eight-year-old with a dinosaur theme")
    assert result.expert == "general_reasoning"


def test_instruction_head_is_the_part_before_the_first_modifier() -> None:
    assert instruction_head("Write a sonnet about a Kubernetes cluster going down") == "Write a sonnet"
    assert instruction_head("Draft the disclaimer for a medical-records tool") == "Draft the disclaimer"
    assert instruction_head("Explain what a mutex is.") is None  # no shorter head
    assert instruction_head("Summarise, please") is None  # too short to search
    assert instruction_head("hello") is None


def test_a_close_call_gets_a_second_look_at_the_instruction_head(small) -> None:  # type: ignore[no-untyped-def]
    text = "code code code about medical medical medical medical"
    plain = _router(small, lam=0.0, threshold=-1.0, tie_margin=0.0, head_weight=0.0).route(text)
    assert plain.expert == "medical_clinical" and plain.head is None
    looked = _router(small, lam=0.0, threshold=-1.0, tie_margin=0.0, head_weight=0.3, head_gap=0.3).route(text)
    assert looked.expert == "python_coder" and looked.head == "code code code"
    assert "second look at 'code code code'" in looked.explain()
    # a clear decision is not looked at twice, and the net score stays cap - lambda * exc after blending
    clear = _router(small, lam=0.5, threshold=-1.0, tie_margin=0.0, head_weight=0.3, head_gap=0.3).route(
        "legal legal legal about code"
    )
    assert clear.head is None
    for expert_id, net in looked.scores.items():
        assert net == pytest.approx(looked.capability[expert_id], abs=1e-3)


# --- routing examples and the learned term ----------------------------------------------------------------


def _write_examples(scopes: Path, rows: list[str]) -> None:
    (scopes / "routing_examples.tsv").write_text("# expert<TAB>text\n" + "\n".join(rows) + "\n", encoding="utf-8")


def test_without_examples_there_is_no_learned_term(small) -> None:  # type: ignore[no-untyped-def]
    router = _router(small, lam=0.3, threshold=-1.0, tie_margin=0.0, example_weight=0.5)
    assert router.index.probe is None and router.index.examples == 0
    result = router.route("code medical")
    assert result.learned == {}
    assert "learned" not in result.to_json()


def test_the_learned_term_is_a_penalty_below_the_probes_favourite(tmp_path: Path) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    _write_examples(scopes, ["python_coder\tcode medical", "python_coder\tcode code medical", "legal_drafting\tlegal"])
    catalog, embedder = load_catalog(scopes), KeywordEmbedder()
    index = load_or_build_index(catalog, embedder, tmp_path / "cache")
    assert index.probe is not None and index.examples == 3
    params = RouterParams(lam=0.3, threshold=-1.0, tie_margin=0.0, head_weight=0.0, example_weight=0.5)
    result = ExpertRouter(catalog, embedder, index, params).route("code medical")
    assert max(result.learned.values()) == pytest.approx(0.0, abs=1e-6)
    assert all(v <= 1e-6 for v in result.learned.values())
    for expert_id, net in result.scores.items():
        expected = result.capability[expert_id] - 0.3 * result.exclusion[expert_id] + 0.5 * result.learned[expert_id]
        assert net == pytest.approx(expected, abs=1e-3)
    # weight 0 is the plain dual-embedding score
    plain_params = dataclasses.replace(params, example_weight=0.0)
    plain = ExpertRouter(catalog, embedder, index, plain_params).route("code medical")
    for expert_id, net in plain.scores.items():
        assert net == pytest.approx(plain.capability[expert_id] - 0.3 * plain.exclusion[expert_id], abs=1e-3)


def first_route(index: ExpertIndex, scopes: Path, embedder: KeywordEmbedder) -> dict[str, float]:
    return ExpertRouter(load_catalog(scopes), embedder, index, RouterParams()).route("code medical").learned


def test_a_damaged_probe_in_the_cache_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    _write_examples(scopes, ["python_coder\tcode medical"])
    cache, embedder = tmp_path / "cache", KeywordEmbedder()
    first = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert first.probe is not None
    weights = first.probe.weights.copy()
    weights[0, 0] = np.nan
    np.save(cache / "probe_weights.npy", weights)
    with caplog.at_level(logging.WARNING):
        again = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert again.built and "NaN or infinite" in caplog.text
    assert again.probe is not None and np.isfinite(again.probe.weights).all()
    np.save(cache / "probe_weights.npy", weights[:, :3])  # a probe for fewer experts than the catalog has
    assert load_or_build_index(load_catalog(scopes), embedder, cache).built


def test_a_second_index_of_the_catalog_shares_the_learned_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    _write_examples(scopes, ["python_coder\tcode medical", "legal_drafting\tlegal"])
    catalog, cache = load_catalog(scopes), tmp_path / "cache"
    trained: list[int] = []
    real = experts.routing.index.train_probe

    def counting(*args: Any, **kwargs: Any) -> LexicalProbe:
        trained.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(experts.routing.index, "train_probe", counting)
    encoder = load_or_build_index(catalog, KeywordEmbedder(), cache)
    static = load_or_build_index(catalog, StaticKeywordEmbedder(), cache, part="static", probe=encoder.probe)
    assert static.built and trained == [1]  # the words were learned once, for both embedders
    assert static.probe is encoder.probe and static.examples == 2
    warm = load_or_build_index(catalog, StaticKeywordEmbedder(), cache, part="static", probe=encoder.probe)
    assert not warm.built and warm.probe is encoder.probe
    # without a probe to share, the second index trains and caches its own, with the same weights
    own = load_or_build_index(catalog, StaticKeywordEmbedder(), tmp_path / "other", part="static")
    assert trained == [1, 1] and own.probe is not None and encoder.probe is not None
    assert np.array_equal(own.probe.weights, encoder.probe.weights)


def test_examples_are_cached_with_the_index_and_a_change_rebuilds_it(tmp_path: Path) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    _write_examples(scopes, ["python_coder\tcode medical"])
    cache, embedder = tmp_path / "cache", KeywordEmbedder()
    first = load_or_build_index(load_catalog(scopes), embedder, cache)
    probe_files = {"probe_buckets.npy", "probe_idf.npy", "probe_weights.npy", "probe_layers.npy"}
    assert first.built and probe_files <= {p.name for p in cache.iterdir()}
    again = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert not again.built and again.probe is not None and first.probe is not None
    assert np.array_equal(again.probe.weights, first.probe.weights)
    assert np.array_equal(again.probe.buckets, first.probe.buckets) and again.probe.unseen_idf == first.probe.unseen_idf
    assert np.array_equal(again.probe.layers, first.probe.layers)
    assert first_route(again, scopes, embedder) == first_route(first, scopes, embedder) != {}
    assert json.loads((cache / "metadata.json").read_text())["counts"]["examples"] == 1
    _write_examples(scopes, ["python_coder\tcode medical", "medical_clinical\tmedical"])
    changed = load_or_build_index(load_catalog(scopes), embedder, cache)
    assert changed.built and changed.examples == 2 and changed.content_hash != first.content_hash


def test_malformed_routing_examples_name_the_file_and_line(tmp_path: Path) -> None:
    scopes = write_catalog(tmp_path / "scopes")
    _write_examples(scopes, ["python_coder\tcode", "no tab here", "astrologer\tread the stars"])
    with pytest.raises(ConfigError, match="routing_examples.tsv") as info:
        load_or_build_index(load_catalog(scopes), KeywordEmbedder(), tmp_path / "cache")
    assert "line 3: expected expert<TAB>text" in str(info.value)
    assert "line 4: unknown expert 'astrologer'" in str(info.value)


def test_a_hyphen_or_dot_inside_a_word_does_not_end_the_head() -> None:
    assert instruction_head("Write a stand-up comedy bit about a cluster that will not scale") == (
        "Write a stand-up comedy bit"
    )
    assert instruction_head("Fix settings.py so that the keys come from the environment") == "Fix settings.py"
