"""The local model's ONNX graph: built once from the shipped weights, cached, loaded cheaply.

The graph is written by ``bert_onnx`` from ``model.safetensors`` (no torch, no hub) and kept
in a user cache, next to the weights' hash, so a new process neither hashes 90 MB again nor
rebuilds the graph:

    $CITEWISE_CACHE (else $XDG_CACHE_HOME/citewise, else ~/.cache/citewise)
        weights-sha256.json                                 sha256 per weights file, by size and mtime
        onnx/<model>-<weights sha256[:16]>-f<FORMAT>.onnx   the network, mean pooling, L2 norm
        onnx/<model>-<weights sha256[:16]>-f<FORMAT>.onnx.data   its weights (mapped, not parsed)
        onnx/<model>-<weights sha256[:16]>-f<FORMAT>.json   the graph's sha256, the data's size and mtime

A freshly built graph must reproduce the probe vectors recorded from sentence-transformers
(``probes.json``, cosine at least ``MIN_COSINE``, in one padded batch and each alone) before it
is kept; it is written to a temporary folder and renamed into place, so a half-written graph is
never read. Loading hashes the small graph file and trusts the weights file whose size and mtime
match the record; anything else (missing, resized, rewritten, unreadable) is built again. A
cache folder that cannot be written costs a build per process, with a warning, never a failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
FORMAT = 5  # bump when the built graph changes, so old cache files are not reused
MIN_COSINE = 0.9999
PROBES_FILE = Path(__file__).with_name("probes.json")


def cache_dir() -> Path:
    """Where built graphs are kept (``$CITEWISE_CACHE``, else the user's cache folder)."""
    if os.environ.get("CITEWISE_CACHE"):
        return Path(os.environ["CITEWISE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "citewise"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def read_json(path: Path) -> dict[str, Any]:
    """A cache record: the object in ``path``, or {} when it is missing, unreadable or not one."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Write a cache record whole or not at all (a temporary file renamed over ``path``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_path(path.parent, ".json")
    try:
        tmp.write_text(json.dumps(value, indent=1))
        tmp.chmod(0o644)  # mkstemp's files are private; the cache may be shared
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def weights_sha256(path: Path) -> str:
    """The file's sha256, hashed once and then trusted while its size and mtime are unchanged."""
    record = cache_dir() / "weights-sha256.json"
    known = read_json(record)
    key, stamp = str(path.resolve()), _stamp(path)
    entry = known.get(key)
    if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp and entry.get("sha256"):
        return str(entry["sha256"])
    digest = file_sha256(path)
    known[key] = {**stamp, "sha256": digest}
    try:
        write_json(record, known)
    except OSError as e:
        log.warning("cannot record the weights' sha256 in %s (%s): it is hashed again next time",
                    record, e)
    return digest


def probes(model: str) -> tuple[list[str], np.ndarray]:
    """The probe sentences and sentence-transformers' vectors for them, shipped with citewise."""
    entry = json.loads(PROBES_FILE.read_text())[model]
    return list(entry["texts"]), np.asarray(entry["vectors"], dtype=np.float32)


def open_session(source: Path | bytes, threads: int | None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    if threads is not None:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only
    model = str(source) if isinstance(source, Path) else source
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def graph_path(model: str, weights_sha: str) -> Path:
    return cache_dir() / "onnx" / f"{model}-{weights_sha[:16]}-f{FORMAT}.onnx"


def cached_graph(model: str, weights_sha: str) -> Path | None:
    """The cached graph for these weights if its record vouches for it: the small graph file's
    sha256 and its weights file's size and mtime."""
    path = graph_path(model, weights_sha)
    meta = read_json(path.with_suffix(".json"))
    if meta.get("weights_sha256") != weights_sha or meta.get("format") != FORMAT:
        return None
    try:
        stamp = _stamp(path.with_name(path.name + ".data"))
        intact = meta.get("onnx_sha256") == file_sha256(path)
    except OSError:
        return None
    return path if intact and {k: meta.get(k) for k in stamp} == stamp else None


def build(model: str, weights_sha: str, make: Callable[[], Any], check: Callable[[Path | bytes], None]
          ) -> Path | bytes:
    """Build the graph ``make()`` writes, check it with ``check(source)`` (which raises
    EmbedderError when it disagrees with the recorded probes) and keep it in the cache; the
    graph's bytes when the cache cannot be written."""
    from citewise.embedders import bert_onnx

    path = graph_path(model, weights_sha)
    log.info("building the ONNX graph of %s once, into %s", model, path.parent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".building-"))
    except OSError as e:
        log.warning("cannot write the model cache %s (%s): the graph is built in every process; "
                    "set CITEWISE_CACHE to a writable folder", path.parent, e)
        graph = make().SerializeToString()
        check(graph)
        return graph
    try:
        data = bert_onnx.save(make(), tmp / path.name)
        check(tmp / path.name)
        path.with_suffix(".json").unlink(missing_ok=True)  # no record vouches for a half-moved pair
        for done in (data, tmp / path.name):
            done.chmod(0o644)
            os.replace(done, path.parent / done.name)
        write_json(path.with_suffix(".json"), {
            "model": model, "format": FORMAT, "weights_sha256": weights_sha,
            "onnx_sha256": file_sha256(path), **_stamp(path.with_name(data.name)),
        })
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _temp_path(folder: Path, suffix: str) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".building-", suffix=suffix)
    os.close(fd)
    return Path(name)
