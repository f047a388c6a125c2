"""Schema migrations: named steps applied in order when a store is opened, each recorded in
the ``migrations`` table. Every backend lists the same names; only the SQL differs.
"""

from __future__ import annotations

MIGRATIONS: dict[str, list[tuple[str, list[str]]]] = {
    "sqlite": [
        (
            "m001_initial",
            [
                "CREATE TABLE kbs (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                "config TEXT NOT NULL, created_at TEXT NOT NULL, version INTEGER NOT NULL)",
                "CREATE TABLE documents (kb_id INTEGER NOT NULL REFERENCES kbs(id), "
                "doc_id TEXT NOT NULL, title TEXT, source TEXT, content_hash TEXT NOT NULL, "
                "ingested_at TEXT NOT NULL, PRIMARY KEY (kb_id, doc_id))",
                "CREATE TABLE chunks (key INTEGER PRIMARY KEY, kb_id INTEGER NOT NULL, "
                "doc_id TEXT NOT NULL, chunk_id TEXT NOT NULL, ordinal INTEGER NOT NULL, "
                "section TEXT NOT NULL, title TEXT, text TEXT NOT NULL, vector BLOB NOT NULL, "
                "FOREIGN KEY (kb_id, doc_id) REFERENCES documents(kb_id, doc_id))",
                "CREATE INDEX chunks_kb_doc ON chunks (kb_id, doc_id)",
                "CREATE INDEX chunks_kb_chunk ON chunks (kb_id, chunk_id)",
                "CREATE VIRTUAL TABLE chunk_fts USING fts5(kb, body, "
                "tokenize = 'porter unicode61 remove_diacritics 2')",
            ],
        ),
        (
            "m002_query_log",
            [
                "CREATE TABLE query_log (id INTEGER PRIMARY KEY, kb_id INTEGER NOT NULL, "
                "created_at TEXT NOT NULL, question TEXT NOT NULL, status TEXT NOT NULL, "
                "embedder TEXT NOT NULL, embedding BLOB, record TEXT NOT NULL)",
                "CREATE INDEX query_log_kb_time ON query_log (kb_id, created_at)",
            ],
        ),
        (
            # the HTTP service's tables: tenants, their hashed API keys, which tenant owns which
            # knowledge base; deleting a knowledge base removes its rows
            "m003_tenants",
            [
                "CREATE TABLE tenants (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                "created_at TEXT NOT NULL)",
                "CREATE TABLE api_keys (id INTEGER PRIMARY KEY, "
                "tenant_id INTEGER NOT NULL REFERENCES tenants(id), key_hash TEXT NOT NULL UNIQUE, "
                "prefix TEXT NOT NULL, kind TEXT NOT NULL, kb_name TEXT, origins TEXT NOT NULL, "
                "rate_per_minute INTEGER NOT NULL, label TEXT NOT NULL, created_at TEXT NOT NULL, "
                "revoked_at TEXT)",
                "CREATE TABLE kb_owners (kb_id INTEGER PRIMARY KEY REFERENCES kbs(id) ON DELETE CASCADE, "
                "tenant_id INTEGER NOT NULL REFERENCES tenants(id), name TEXT NOT NULL, "
                "UNIQUE (tenant_id, name))",
            ],
        ),
        (
            # the path taken and later feedback as columns; vectors of a replay's shadow index
            "m004_query_log_v2",
            [
                "ALTER TABLE query_log ADD COLUMN path TEXT",
                "ALTER TABLE query_log ADD COLUMN feedback INTEGER",
                "ALTER TABLE query_log ADD COLUMN feedback_note TEXT",
                "ALTER TABLE query_log ADD COLUMN feedback_at TEXT",
                "CREATE TABLE shadow_vectors (kb_id INTEGER NOT NULL, chunk_key INTEGER NOT NULL, "
                "chunk_id TEXT NOT NULL, embedder TEXT NOT NULL, vector BLOB NOT NULL, "
                "PRIMARY KEY (kb_id, chunk_key))",
            ],
        ),
    ],
}
