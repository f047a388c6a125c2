"""The MySQL/MariaDB store over a real connection to the machine's MariaDB."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from citewise.errors import ConfigError, StoreError
from citewise.stores import open_store
from citewise.stores.mysql import open_mysql, parse_version
from citewise.stores.sql import SQLStore
from citewise.stores.urls import redact
from citewise.testing import SQLStoreConformance, config, document
from citewise.testing.sql import rows as sql
from tests.servers import check_reconnects


class TestMySQLStore(SQLStoreConformance):
    @pytest.fixture
    def store(self, mysql_store: SQLStore) -> SQLStore:
        return mysql_store

    @pytest.fixture
    def empty_url(self, mysql_database) -> Iterator[str]:
        with mysql_database() as url:
            yield url


def test_urls_choose_the_mysql_store(mysql_database) -> None:
    with mysql_database() as url:
        for scheme in ("mysql", "mariadb", "mysql+pymysql"):
            store = open_store(url.replace("mysql", scheme, 1))
            assert store.dialect.name == "mysql"
            store.close()


def test_bad_urls_and_refused_connections_are_store_errors() -> None:
    with pytest.raises(ConfigError, match="needs a host and a database"):
        open_store("mysql://root@127.0.0.1:3306")
    with pytest.raises(StoreError, match=r"Cannot open store mysql://root:\*\*\*@127.0.0.1:1/x"):
        open_store("mysql://root:hunter2@127.0.0.1:1/x")
    assert redact("mysql://u:p%40ss@h/db") == "mysql://u:***@h/db"


def test_server_version_is_detected(mysql_store: SQLStore) -> None:
    assert parse_version("10.11.19-MariaDB-0+deb12u1") == ("mariadb", (10, 11, 19))
    assert parse_version("9.1.0") == ("mysql", (9, 1, 0))
    info = mysql_store.dialect.server_info
    assert info["flavour"] == "mariadb" and info["native_vector"] is False


def test_short_and_stop_words_are_left_out_of_the_full_text_query(mysql_store: SQLStore) -> None:
    kb = mysql_store.create_kb("kb", config())
    mysql_store.put_document(kb, *document("a.md", "the nicotine patch is on"))
    assert mysql_store.keyword(kb, ["is", "on", "the"], 10) == []
    assert len(mysql_store.keyword(kb, ["is", "the", "patch"], 10)) == 1


def test_a_dropped_connection_is_opened_again(mysql_store: SQLStore, mariadb_admin) -> None:
    def kill() -> None:
        [(conn_id,)] = sql(mysql_store, "SELECT CONNECTION_ID()")
        with mariadb_admin.cursor() as cur:
            cur.execute(f"KILL {int(conn_id)}")

    check_reconnects(mysql_store, kill)


def test_the_vector_cache_keeps_to_its_byte_budget(mysql_database) -> None:
    with mysql_database() as url:
        store = open_mysql(url, cache_bytes=3 * 8 * 4)  # room for one 3 x 8 matrix
        kbs = [store.create_kb(f"kb{i}", config()) for i in range(3)]
        for kb in kbs:
            store.put_document(kb, *document("a.md", f"one {kb.name}", "two", "three"))
            store.dense_index(kb)
        assert store.cache.held("dense") == [kbs[-1].id]
        assert store.dense_index(kbs[0]).matrix.shape == (3, 8)
        store.close()
