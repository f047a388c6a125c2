import json
from pathlib import Path

import pytest

from citewise.calibrate.querysets import load_queries, read_qrels
from citewise.errors import QueryError
from tests.helpers import SAMPLE, SAMPLE_QUERIES


def test_citewise_jsonl_and_the_shipped_sets() -> None:
    for split in ("train", "test"):
        queries = load_queries(SAMPLE_QUERIES / f"smoking-cessation.{split}.jsonl")
        assert {q.bucket for q in queries} == {"covered", "thin", "out_of_scope"}
        assert len(queries) >= 150 and len({q.id for q in queries}) == len(queries)
        for q in queries:
            assert (q.expect == "answer") == (q.bucket == "covered")
            assert all((SAMPLE / s).exists() for s in q.relevant)


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


def _rows(split: str) -> list[dict]:
    path = SAMPLE_QUERIES / f"smoking-cessation.{split}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_key_fact_is_written_in_one_of_its_sources(split: str) -> None:
    """``must_contain`` is what benchmarks/key_facts.py looks for in answers: a fact no source
    holds could never be found, and would count against the answers, not the label."""
    texts = {p.name: _plain(p.read_text(encoding="utf-8")) for p in SAMPLE.glob("*.md")}
    absent = []
    for row in _rows(split):
        if row["bucket"] != "covered":
            assert "must_contain" not in row, row["id"]
            continue
        assert row["must_contain"], row["id"]
        for fact in row["must_contain"]:
            for text in [fact] if isinstance(fact, str) else fact:  # a list: any one will do
                if not any(_plain(text) in texts[s] for s in row["sources"]):
                    absent.append((row["id"], text))
    assert absent == []


def test_no_question_is_in_both_splits() -> None:
    train = {_plain(r["query"]) for r in _rows("train")}
    assert not train & {_plain(r["query"]) for r in _rows("test")}


def test_beir_queries_with_crlf_qrels(tmp_path: Path) -> None:
    (tmp_path / "q.jsonl").write_text('{"_id": "1", "text": "claim one"}\n{"_id": "2", "text": "no qrels"}\n')
    (tmp_path / "qrels.tsv").write_bytes(b"query-id\tcorpus-id\tscore\r\n1\td1\t1\r\n1\td2\t2\r\n")
    assert read_qrels(tmp_path / "qrels.tsv") == {"1": {"d1": 1, "d2": 2}}
    queries = load_queries(tmp_path / "q.jsonl", tmp_path / "qrels.tsv")
    assert [(q.id, q.relevant) for q in queries] == [("1", {"d1": 1, "d2": 2})]
    with pytest.raises(QueryError, match="--qrels"):
        load_queries(tmp_path / "q.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ('{"id": "1", "query": "q"}', "missing expect"),
        ('{"id": "1", "query": "q", "expect": "maybe"}', "expect must be"),
        ('{"id": "1", "query": "q", "expect": "answer", "sources": []}', "needs its sources"),
        ('{"id": "1", "query": "q", "expect": "refuse", "bucket": "odd"}', "bucket must be"),
        ('{"id": "1", "query": "q", "expect": "answer", "sources": "a.md"}', "sources must be a list"),
        ('{"id": "1", "query": "q", "expect": "answer", "sources": [3]}', "sources must be a list"),
    ],
)
def test_bad_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "q.jsonl").write_text(line + "\n")
    with pytest.raises(QueryError, match=message):
        load_queries(tmp_path / "q.jsonl")
