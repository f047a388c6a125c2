"""One connection to a SQL database through its dialect: transactions, reads, migrations.

Reads run in autocommit, so a stateless worker sees other workers' committed writes on its
next statement; writes run in one explicit transaction (SQLite's ``BEGIN IMMEDIATE``: one
writer per file). A connection the server closed (idle timeout, restart) is opened again
before a read or a transaction starts; one lost in the middle of a transaction rolls back and
raises. The driver's errors become ``StoreError``, whose message names the store by its URL
with the password redacted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, TypeVar

from citewise.errors import KnowledgeBaseError, StoreError
from citewise.kb import KBConfig, KnowledgeBase
from citewise.stores.dialect import Dialect
from citewise.stores.migrations import MIGRATIONS

T = TypeVar("T")
KB_COLUMNS = "id, name, config, created_at, tenant_id"


def now() -> str:
    """The time a row is written, as the tables keep it: ISO-8601 UTC to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def kb_of(row: tuple[Any, ...]) -> KnowledgeBase:
    """A ``kbs`` row read as ``KB_COLUMNS``."""
    return KnowledgeBase(int(row[0]), row[1], KBConfig.from_json(row[2]), row[3], int(row[4]))


def gone(kb: KnowledgeBase) -> KnowledgeBaseError:
    return KnowledgeBaseError(f"Knowledge base {kb.name!r} no longer exists")


class Database:
    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.url = dialect.url
        self.lock = threading.RLock()
        try:
            self.conn = dialect.connect()
        except dialect.errors as e:
            raise StoreError(f"Cannot open store {self.url}: {e}") from None

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Any]:
        """A cursor in one transaction, committed at the end or rolled back on any error;
        with ``write=False`` a consistent read: every statement sees one snapshot."""
        with self.lock:
            cur = self._retry(lambda: self.dialect.begin(self.conn, write),
                              "cannot start a transaction")
            try:
                yield cur
                self.dialect.commit(cur)
            except BaseException as e:
                self.dialect.rollback(cur)
                if isinstance(e, self.dialect.errors):
                    what = "write" if write else "read"
                    raise StoreError(f"{self.url}: {what} failed and was rolled back: {e}") from None
                raise
            finally:
                with suppress(*self.dialect.errors):
                    cur.close()

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One autocommit read: it sees every write committed before it started."""

        def read() -> list[tuple[Any, ...]]:
            cur = self.dialect.cursor(self.conn)
            try:
                cur.execute(sql, params)
                return list(cur.fetchall())
            finally:
                cur.close()

        with self.lock:
            return self._retry(read, "read failed")

    def insert_id(self, cur: Any, sql: str, params: tuple[Any, ...]) -> int:
        return self.dialect.insert_id(cur, sql, params)

    def insert_new(self, sql: str, params: tuple[Any, ...], taken: Callable[[], bool],
                   error: Exception) -> int:
        """Insert a row whose name a unique key keeps new; its id. ``error`` when the key
        refused it because the name is taken: of two inserts at once one wins, and the
        other's waits on the winner's row, so the read after it sees that row."""
        try:
            with self.transaction() as cur:
                return self.insert_id(cur, sql, params)
        except StoreError:
            if taken():
                raise error from None
            raise

    def lock_kb(self, cur: Any, kb: KnowledgeBase) -> int:
        """Hold ``kb``'s row for the transaction (writers of one knowledge base go one at a
        time); its version. ``KnowledgeBaseError`` if it was deleted meanwhile."""
        cur.execute(f"SELECT version FROM kbs WHERE id = %s{self.dialect.lock}", (kb.id,))
        row = cur.fetchone()
        if row is None:
            raise gone(kb)
        return int(row[0])

    def _retry(self, step: Callable[[], T], what: str) -> T:
        """Run ``step``; if it fails because the connection is gone, reconnect and run it again."""
        try:
            return step()
        except self.dialect.errors as e:
            if self.dialect.alive(self.conn):
                raise StoreError(f"{self.url}: {what}: {e}") from None
        with suppress(Exception):
            self.conn.close()
        try:
            self.conn = self.dialect.connect()
            return step()
        except self.dialect.errors as e:
            raise StoreError(f"{self.url}: {what} (reconnected): {e}") from None

    def migrate(self) -> list[str]:
        """Apply the named migrations not yet recorded (``migrations.py``), under the dialect's
        lock so that two workers opening a new database at once do not both apply them."""
        applied: list[str] = []
        with self.lock, self.dialect.migrating(self.conn), self.transaction() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS migrations (name VARCHAR(128) PRIMARY KEY, "
                        "applied_at VARCHAR(32) NOT NULL)")
            cur.execute("SELECT name FROM migrations")
            done = {r[0] for r in cur.fetchall()}
            for name, statements in MIGRATIONS[self.dialect.name]:
                if name in done:
                    continue
                for statement in statements:
                    cur.execute(self.dialect.schema(statement))
                cur.execute("INSERT INTO migrations VALUES (%s, %s)", (name, now()))
                applied.append(name)
        return applied

    def close(self) -> None:
        with self.lock:
            self.conn.close()
