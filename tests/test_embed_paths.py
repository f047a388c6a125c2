"""The local model's execution paths: the fastest one the host offers is chosen once and cached,
a host without a feature falls back, a text's vector does not depend on its batch on any path,
and a knowledge base records the path its vectors were made on, which its questions use."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citewise import embedders
from citewise.embedders import embedder_of, runtimes
from citewise.embedders.local import LocalEmbedder
from citewise.embedders.runtimes import REFERENCE, Trial
from citewise.engine import Engine
from citewise.errors import ConfigError, EmbedderError
from tests.helpers import SAMPLE

SHA = "ab" * 32


@pytest.fixture(name="host")
def host_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict]:
    """A host whose CPU offers what the test says, measured into a fresh cache."""
    monkeypatch.delenv("CITEWISE_EMBED_PATH", raising=False)
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path))
    said: dict = {"caps": frozenset({"FP32", "BF16", "INT8"}), "key": "host-a"}
    monkeypatch.setattr(runtimes, "capabilities", lambda: said["caps"])
    monkeypatch.setattr(runtimes, "host_key", lambda: said["key"])
    monkeypatch.setattr(runtimes, "open_runner", lambda path, *a, **k: path)
    yield said


def measured(speeds: dict[str, float], failing: tuple[str, ...] = (), seen: list | None = None):
    def measure(path: str, runner: object) -> Trial:
        if seen is not None:
            seen.append(path)
        return Trial(path, speeds[path], 0.99 if path in failing else 1.0, 1.0)
    return measure


def test_the_fastest_path_that_passes_is_chosen_once_per_host(host: dict, tmp_path: Path) -> None:
    source = tmp_path / "graph.onnx"
    speeds = {"onnxruntime-fp32": 8000.0, "openvino-f32": 10000.0, "openvino-bf16": 31000.0}
    seen: list[str] = []
    assert runtimes.fastest("m", SHA, source, 2, measured(speeds, seen=seen)) == "openvino-bf16"
    assert seen == list(runtimes.PATHS)
    # cached: the same host measures nothing again
    assert runtimes.fastest("m", SHA, source, 2, measured(speeds, seen=seen)) == "openvino-bf16"
    assert len(seen) == 3 and len(list((tmp_path / "paths").glob("*.json"))) == 1
    # another host (another CPU, another runtime version) measures again; a path below its
    # quality bound is never chosen, however fast
    host["key"] = "host-b"
    assert runtimes.fastest("m", SHA, source, 2, measured(speeds, failing=("openvino-bf16",))) \
        == "openvino-f32"


def test_a_host_without_the_feature_falls_back(host: dict, tmp_path: Path) -> None:
    source = tmp_path / "graph.onnx"
    speeds = {"onnxruntime-fp32": 8000.0, "openvino-f32": 7000.0, "openvino-bf16": 31000.0}
    host["caps"] = frozenset({"FP32", "INT8"})  # AVX2 only: no native bfloat16
    assert runtimes.offered() == ("onnxruntime-fp32", "openvino-f32")
    assert "bfloat16" in str(runtimes.unavailable("openvino-bf16"))
    assert runtimes.fastest("m", SHA, source, 2, measured(speeds)) == REFERENCE
    host["caps"], host["key"] = frozenset(), "no-openvino"  # OpenVINO not installed
    seen: list[str] = []
    assert runtimes.fastest("m", SHA, source, 2, measured(speeds, seen=seen)) == REFERENCE
    assert seen == []  # nothing to choose between: nothing measured
    assert runtimes.unavailable(REFERENCE) is None
    # a graph kept in memory (the cache folder not writable) runs on ONNX Runtime
    host["caps"] = frozenset({"FP32", "BF16"})
    assert runtimes.fastest("m", SHA, b"graph", 2, measured(speeds)) == REFERENCE


def test_a_path_named_in_the_environment_is_used_if_the_host_has_it(
        host: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CITEWISE_EMBED_PATH", "openvino-f32")
    assert runtimes.fastest("m", SHA, tmp_path / "g.onnx", 2, measured({})) == "openvino-f32"
    host["caps"] = frozenset({"FP32"})
    monkeypatch.setenv("CITEWISE_EMBED_PATH", "openvino-bf16")
    with pytest.raises(ConfigError, match="CITEWISE_EMBED_PATH: openvino-bf16 needs a CPU"):
        runtimes.fastest("m", SHA, tmp_path / "g.onnx", 2, measured({}))
    monkeypatch.setenv("CITEWISE_EMBED_PATH", "tpu-int4")
    with pytest.raises(ConfigError, match="not an execution path"):
        runtimes.fastest("m", SHA, tmp_path / "g.onnx", 2, measured({}))


TEXTS = ["How long do nicotine withdrawal symptoms last?",
         "Varenicline is started one to two weeks before the quit date.",
         "Common side effects of bupropion include insomnia and dry mouth, and rarely seizures "
         "in people with a history of them, which is why it is not prescribed to them."]


@pytest.mark.model
@pytest.mark.parametrize("path", runtimes.PATHS)
def test_a_texts_vector_is_the_same_alone_and_in_a_batch_on_every_path(path: str) -> None:
    if (why := runtimes.unavailable(path)) is not None:
        pytest.skip(why)
    model = LocalEmbedder("all-MiniLM-L6-v2", path)
    padded = TEXTS + ["a short one", "x"]  # the first texts padded beside shorter ones
    batch = model.embed(padded)[: len(TEXTS)]
    alone = np.vstack([model.embed([t]) for t in TEXTS])
    assert model.execution_path == path
    assert (batch * alone).sum(1).min() >= runtimes.SAME_TEXT
    reference = LocalEmbedder("all-MiniLM-L6-v2", REFERENCE).embed(TEXTS)
    assert (alone * reference).sum(1).min() >= runtimes.QUALITY[path]


@pytest.fixture(name="fresh_models")
def fresh_models_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's embedders built again, so a path set here is the one chosen."""
    embedders._built.cache_clear()
    yield
    embedders._built.cache_clear()


@pytest.mark.model
def test_a_knowledge_base_records_its_path_and_its_questions_use_it(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, fresh_models: None) -> None:
    other = next((p for p in runtimes.offered() if p != REFERENCE), None)
    if other is None:
        pytest.skip("this host offers one execution path")
    monkeypatch.setenv("CITEWISE_EMBED_PATH", other)
    kb = engine.create_kb("docs")
    assert kb.config.embed_path == ""  # chosen at the first ingest
    report = engine.ingest(kb, sorted(SAMPLE.glob("*.md"))[:2])
    kb = engine.store.get_kb("docs")
    assert report.embed_path == kb.config.embed_path == other
    assert embedder_of(kb).execution_path == other  # type: ignore[attr-defined]
    question = "How long do nicotine withdrawal symptoms last?"
    stored = engine.retrieve(kb, question).context
    # the host's choice changes; the knowledge base keeps its path, for ingest and questions
    monkeypatch.setenv("CITEWISE_EMBED_PATH", REFERENCE)
    embedders._built.cache_clear()
    engine.ingest(kb, sorted(SAMPLE.glob("*.md"))[2:3])
    kb = engine.store.get_kb("docs")
    assert kb.config.embed_path == other and embedder_of(kb).execution_path == other  # type: ignore[attr-defined]
    # every stored vector is what the knowledge base's path makes of its chunk, the new ones too
    keys = list(engine.store.dense_index(kb).keys)
    chunks = engine.store.chunks(kb, keys)
    made = embedder_of(kb).embed([chunks[k].embed_text for k in keys])
    assert np.allclose(engine.store.vectors(kb, keys), made, atol=1e-5)
    assert engine.retrieve(kb, question).context[0].chunk.id == stored[0].chunk.id


@pytest.mark.model
def test_a_path_the_host_lacks_is_refused_and_old_vectors_keep_theirs(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, fresh_models: None) -> None:
    kb = engine.create_kb("made-elsewhere")
    engine.ingest(kb, sorted(SAMPLE.glob("*.md"))[:1])
    kb = engine.store.get_kb("made-elsewhere")
    monkeypatch.setattr(runtimes, "capabilities", lambda: frozenset({"FP32"}))
    elsewhere = engine.store.update_kb(kb.name, replace(kb.config, embed_path="openvino-bf16"))
    with pytest.raises(EmbedderError, match="made on the execution path openvino-bf16, and "
                                            "openvino-bf16 needs a CPU with native bfloat16"):
        engine.retrieve(elsewhere, "How long do withdrawal symptoms last?")
    # vectors stored before paths were recorded were made on ONNX Runtime in float32
    before = engine.store.update_kb(kb.name, replace(kb.config, embed_path=""))
    assert embedder_of(before).execution_path == REFERENCE  # type: ignore[attr-defined]
    engine.ingest(before, sorted(SAMPLE.glob("*.md"))[1:2])
    assert engine.store.get_kb(kb.name).config.embed_path == REFERENCE


def test_a_graph_no_runtime_can_load_is_built_again_once_then_an_error_naming_the_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = LocalEmbedder(path=REFERENCE)
    graph = tmp_path / "graph.onnx"
    graph.write_bytes(b"not a graph")
    tries: list[object] = []

    def unloadable(path: str, source: object, *args: object) -> None:
        tries.append(source)
        raise RuntimeError("INVALID_PROTOBUF")

    monkeypatch.setattr(runtimes, "open_runner", unloadable)
    # the cached graph, and the one built again in its place: the same unloadable file
    monkeypatch.setattr(LocalEmbedder, "_source", property(lambda self: graph))
    model.__dict__["_source"] = graph  # what the rebuild drops
    with pytest.raises(EmbedderError, match=f"execution path {REFERENCE} cannot load the graph of "
                       "all-MiniLM-L6-v2, even built again: INVALID_PROTOBUF"):
        model.embed(["a question"])
    assert len(tries) == 2
