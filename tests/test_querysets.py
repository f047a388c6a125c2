from pathlib import Path

import pytest

from citewise.errors import QueryError
from citewise.querysets import load_queries, read_qrels
from tests.helpers import SAMPLE, SAMPLE_QUERIES


def test_citewise_jsonl_and_the_shipped_sets() -> None:
    for split in ("train", "test"):
        queries = load_queries(SAMPLE_QUERIES / f"smoking-cessation.{split}.jsonl")
        assert {q.bucket for q in queries} == {"covered", "thin", "out_of_scope"}
        for q in queries:
            assert (q.expect == "answer") == (q.bucket == "covered")
            assert all((SAMPLE / s).exists() for s in q.relevant)


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
