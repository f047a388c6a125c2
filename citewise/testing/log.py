"""``QueryLogConformance`` (the ``QueryLog`` role) and ``ShadowConformance`` (``Shadows``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from citewise.errors import FeedbackGivenError, QueryLogError
from citewise.kb import KBConfig
from citewise.stores.roles import Store
from citewise.testing.helpers import DIM, Conformance, config, document


class QueryLogConformance(Conformance):
    def test_query_log_keeps_the_record_and_the_embedding(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        entry = {"question": "How long does withdrawal last?", "status": "answered",
                 "embedder": "hashing:8", "time": "2026-01-01T00:00:00+00:00", "top": [0.5]}
        vec = np.arange(DIM, dtype=np.float32) / DIM
        first = store.log_query(kb, entry, vec)
        second = store.log_query(other, {"question": "q2?", "status": "refused"}, np.ones(DIM))
        assert second > first > 0
        [row] = store.query_log(kb, embeddings=True)
        assert (row.id, row.created_at, row.question, row.status, row.embedder) == (
            first, entry["time"], entry["question"], "answered", "hashing:8")
        np.testing.assert_array_equal(row.embedding, vec)
        assert row.record == entry and json.dumps(row.record)
        store.delete_kb("other")
        assert self.table(store, "SELECT id FROM query_log ORDER BY id") == [(first,)]

    def test_query_log_reads_in_time_order_with_since_and_until(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        for day, q in ((3, "c"), (1, "a"), (2, "b")):
            store.log_query(kb, {"question": q, "status": "answered", "path": "answered",
                                 "embedder": "hashing:8", "time": f"2026-01-0{day}T00:00:00+00:00",
                                 "extra": {"n": day}}, np.full(DIM, day, np.float32))
        store.log_query(other, {"question": "secret", "time": "2026-01-02T00:00:00+00:00"}, None)
        rows = store.query_log(kb)
        assert [r.question for r in rows] == ["a", "b", "c"] and rows[0].embedding is None
        assert rows[0].path == "answered" and rows[0].record["extra"] == {"n": 1}
        got = store.query_log(kb, since="2026-01-02T00:00:00+00:00", until="2026-01-03T00:00:00+00:00",
                              embeddings=True)
        assert [r.question for r in got] == ["b"]
        np.testing.assert_array_equal(got[0].embedding, np.full(DIM, 2, np.float32))
        assert [r.question for r in store.query_log(other)] == ["secret"]
        assert store.query_log(other, embeddings=True)[0].embedding is None
        assert store.purge_query_log(kb, "2026-01-03T00:00:00+00:00") == 2
        assert [r.question for r in store.query_log(kb)] == ["c"]
        assert len(store.query_log(other)) == 1

    def test_feedback_is_scoped_to_the_knowledge_base(self, store: Store) -> None:
        a = store.create_kb("a", config())
        b = store.create_kb("b", config())
        mine = store.log_query(a, {"question": "q", "status": "answered"}, None)
        theirs = store.log_query(b, {"question": "q", "status": "answered"}, None)
        store.add_feedback(a, mine, True, "good")
        row = store.query_log(a)[0]
        assert (row.feedback, row.feedback_note) == (True, "good") and row.feedback_at
        store.add_feedback(a, mine, False)  # an operator's feedback overwrites
        assert store.query_log(a)[0].feedback is False
        missing = theirs + 1000
        with pytest.raises(QueryLogError) as gone:
            store.add_feedback(a, missing, True)
        with pytest.raises(QueryLogError) as foreign:
            store.add_feedback(a, theirs, True)
        assert str(foreign.value) == str(gone.value).replace(str(missing), str(theirs))
        assert store.query_log(b)[0].feedback is None

    def test_token_feedback_is_first_only_and_scoped(self, store: Store) -> None:
        kb, other = store.create_kb("kb", config()), store.create_kb("other", config())
        first = store.log_query(kb, {"question": "q?", "status": "answered"}, None, feedback_token="tok-a")
        store.log_query(other, {"question": "q?", "status": "answered"}, None, feedback_token="tok-b")
        store.log_query(kb, {"question": "q2?", "status": "refused"}, None)
        with pytest.raises(QueryLogError) as wrong:
            store.add_token_feedback(kb, "tok-x", True)
        with pytest.raises(QueryLogError) as theirs:
            store.add_token_feedback(kb, "tok-b", True)
        assert str(wrong.value) == str(theirs.value)
        assert not isinstance(wrong.value, FeedbackGivenError)
        assert store.add_token_feedback(kb, "tok-a", False, "first") == first
        with pytest.raises(FeedbackGivenError):
            store.add_token_feedback(kb, "tok-a", True, "second")
        rows = store.query_log(kb)
        assert [(r.feedback, r.feedback_note) for r in rows] == [(False, "first"), (None, "")]
        assert store.query_log(other)[0].feedback is None
        assert "tok-a" not in json.dumps([r.record for r in rows])


class ShadowConformance(Conformance):
    def test_switch_vectors_is_all_or_nothing(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one", "two"))
        index = store.dense_index(kb)
        keys = [int(k) for k in index.keys]
        ids = [store.chunks(kb, [k])[k].id for k in keys]
        new = np.eye(4, dtype=np.float32)[: len(keys)]
        store.put_shadow_vectors(kb, "hashing:4", keys[:1], ids[:1], new[:1])
        assert store.shadow_index(kb, "hashing:4", 4).matrix.shape == (1, 4)
        target = KBConfig(embedder="hashing:4", dim=4)
        with pytest.raises(QueryLogError, match="1 chunks .* have no hashing:4 vector"):
            store.switch_vectors(kb, target)
        assert store.get_kb("kb").config == config()
        np.testing.assert_array_equal(store.dense_index(kb).matrix, index.matrix)
        store.put_shadow_vectors(kb, "hashing:4", keys, ids, new)
        switched = store.switch_vectors(kb, target)
        assert switched.config == target
        np.testing.assert_array_equal(store.dense_index(switched).matrix, new)
        assert store.shadow_index(switched, "hashing:4", 4).matrix.shape == (0, 4)

    def test_shadows_of_replaced_chunks_are_not_served(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one"))
        key = int(store.dense_index(kb).keys[0])
        store.put_shadow_vectors(kb, "hashing:4", [key], [store.chunks(kb, [key])[key].id],
                                 np.eye(4, dtype=np.float32)[:1])
        store.put_document(kb, *document("a.md", "one, changed"))
        assert store.shadow_index(kb, "hashing:4", 4).matrix.shape == (0, 4)
        with pytest.raises(QueryLogError, match="run `citewise replay` again"):
            store.switch_vectors(kb, KBConfig(embedder="hashing:4", dim=4))
        store.drop_shadow(kb)

    def test_deleting_a_kb_clears_its_log_and_shadow_vectors(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        for k in (kb, other):
            store.put_document(k, *document("a.md", "one"))
            key = int(store.dense_index(k).keys[0])
            store.put_shadow_vectors(k, "hashing:4", [key], [store.chunks(k, [key])[key].id],
                                     np.eye(4, dtype=np.float32)[:1])
            store.log_query(k, {"question": "q", "status": "answered"}, None)
        store.delete_kb("kb")
        assert self.table(store, "SELECT kb_id FROM shadow_vectors") == [(other.id,)]
        assert [r[0] for r in self.table(store, "SELECT kb_id FROM query_log")] == [other.id]
        assert store.shadow_index(other, "hashing:4", 4).matrix.shape == (1, 4)
