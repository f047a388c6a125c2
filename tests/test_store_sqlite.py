from pathlib import Path

import pytest

from citewise.errors import StoreError, UnknownNameError
from citewise.stores import open_store
from citewise.stores.migrations import MIGRATIONS
from citewise.stores.sqlite import open_sqlite
from citewise.testing import SQLStoreConformance, config, document
from citewise.testing.sql import old_kb, schema_before


class Testopen_sqlite(SQLStoreConformance):
    """Every role on SQLite (the ``store`` fixture is conftest.py's)."""

    @pytest.fixture
    def empty_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/empty.db"


def test_migrations_are_named_and_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = open_sqlite(path)
    names = [r[0] for r in first.db.conn.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == sorted(name for name, _ in MIGRATIONS["sqlite"])
    assert names[:2] == ["m001_initial", "m002_query_log"]
    assert {"m003_tenants", "m004_query_log_v2"} <= set(names)
    first.close()
    again = open_sqlite(path)
    assert again.migrate() == []
    again.close()


def test_open_store_urls(tmp_path: Path) -> None:
    assert open_store(str(tmp_path / "a.db")).dialect.path == str(tmp_path / "a.db")
    assert open_store(f"sqlite:///{tmp_path}/b.db").dialect.path == f"{tmp_path}/b.db"
    valid = "Valid store names: mariadb, mysql, postgres, postgresql, sqlite"
    with pytest.raises(UnknownNameError, match=valid):
        open_store("oracle://x")


def test_keyword_search_is_scoped_inside_the_full_text_query(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path / "s.db")
    kbs = [store.create_kb(f"kb{i}", config()) for i in range(12)]
    for kb in kbs:
        store.put_document(kb, *document("d.md", f"shared words plus marker{kb.id}"))
    hits = store.keyword(kbs[1], ["shared", "words"], 50)
    assert len(hits) == 1
    assert store.chunks(kbs[1], [hits[0][0]])[hits[0][0]].text.endswith(f"marker{kbs[1].id}")


def test_a_store_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="Cannot open SQLite store"):
        open_sqlite(bad)


def test_a_deleted_knowledge_base_id_is_never_handed_out_again(tmp_path: Path) -> None:
    """Another process's cached vectors of a deleted knowledge base must never pass for those of
    a new one: SQLite would reuse the highest id, so ids come from a counter that never goes back."""
    path = tmp_path / "s.db"
    worker, admin = open_sqlite(path), open_sqlite(path)
    old = admin.create_kb("a", config())
    admin.put_document(old, *document("secret.md", "tenant a secret"))
    assert worker.dense_index(worker.get_kb("a")).matrix.shape[0] == 1  # cached by the worker
    admin.delete_kb("a")
    new = admin.create_kb("b", config())
    assert new.id > old.id
    admin.put_document(new, *document("public.md", "tenant b notes"))
    index = worker.dense_index(worker.get_kb("b"))
    assert [c.text for c in worker.chunks(new, [int(k) for k in index.keys]).values()] == [
        "tenant b notes"
    ]
    reopened = open_sqlite(path)  # the counter survives reopening
    assert reopened.create_kb("c", config()).id > new.id


def test_m011_carries_on_the_counter_of_ids_never_reused(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    with schema_before("m011_kb_tenant_column", url, monkeypatch) as old:
        kbs = [old_kb(old, f"kb{i}") for i in range(3)]
        with old.db.transaction() as cur:  # m005's counter remembers an id since deleted
            cur.execute("INSERT INTO kb_ids (id) VALUES (%s)", (kbs[-1].id + 5,))
            cur.execute("DELETE FROM kbs WHERE id = %s", (kbs[-1].id,))
    store = open_store(url)
    assert [kb.name for kb in store.list_kbs()] == ["kb0", "kb1"]
    assert store.create_kb("new", config()).id == kbs[-1].id + 6
    store.close()
