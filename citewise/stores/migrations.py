"""Schema migrations: named steps applied in order when a store is opened, each recorded in
the ``migrations`` table. Every backend lists the same names; only the SQL differs.

Adding one: append ``("m00N_name", [statements])`` to each backend's list. MySQL commits DDL
implicitly, so its statements say ``IF NOT EXISTS`` where they can (a step interrupted half way
is then simply run again); PostgreSQL applies each whole run in one transaction. PostgreSQL's
``{vector}`` is ``vector`` where the server has pgvector and ``bytea`` where it has not.
"""

from __future__ import annotations

_INNODB = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
# the sentence rows of knowledge bases on the local model (its config JSON names the embedder)
_LOCAL_ROWS = ("DELETE FROM chunk_sentences WHERE kb_id IN (SELECT id FROM kbs "
               "WHERE {find}(config, '\"embedder\": \"local:') > 0)")

# the sentence rows of chunks with more than one line (a list, a table, paragraphs): their
# citable units are now split by structure (units.py), so the rows lack the new units' texts
_STRUCTURED_ROWS = ("DELETE FROM chunk_sentences WHERE EXISTS (SELECT 1 FROM chunks c "
                    "WHERE c.kb_id = chunk_sentences.kb_id AND c.{key} = chunk_sentences.chunk_key "
                    "AND {find}(c.text, {newline}) > 0)")

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
        (
            # SQLite hands a deleted knowledge base's id (the highest) to the next one created;
            # another process's cached vectors of the old one could then pass for the new
            # one's. Ids now come from an AUTOINCREMENT counter that never goes back.
            "m005_kb_ids_never_reused",
            [
                "CREATE TABLE kb_ids (id INTEGER PRIMARY KEY AUTOINCREMENT)",
                "INSERT INTO kb_ids (id) SELECT max(id) FROM kbs HAVING max(id) IS NOT NULL",
            ],
        ),
        (
            # the vectors of each chunk's sentences, embedded at ingest (stores/sentence_rows.py)
            "m006_sentence_vectors",
            [
                "CREATE TABLE chunk_sentences (chunk_key INTEGER PRIMARY KEY, "
                "kb_id INTEGER NOT NULL, dtype TEXT NOT NULL, text_keys BLOB NOT NULL, "
                "vectors BLOB NOT NULL)",
                "CREATE INDEX chunk_sentences_kb ON chunk_sentences (kb_id)",
            ],
        ),
        (
            # the sha256 of the random token an answer carries for its feedback (the HTTP
            # service shows callers the token, never the global row id)
            "m007_feedback_token",
            [
                "ALTER TABLE query_log ADD COLUMN feedback_token TEXT",
                "CREATE INDEX query_log_token ON query_log (kb_id, feedback_token)",
            ],
        ),
        (
            # each API key's shared rate window (citewise/ratelimit.py, stores/rate_rows.py):
            # the moment its bucket is full again, in microseconds since the epoch
            "m008_rate_windows",
            [
                "CREATE TABLE rate_windows (name TEXT PRIMARY KEY, "
                "booked_until INTEGER NOT NULL) WITHOUT ROWID",
            ],
        ),
        (
            # the local model's sentence vectors are now read in their chunk (late chunking,
            # sentence_vectors.py), keyed as before: rows made before are dropped, so that
            # questions make the new ones and `citewise kb backfill` stores them
            "m009_contextual_sentence_vectors",
            [_LOCAL_ROWS.format(find="instr")],
        ),
        (
            # questions make the new rows meanwhile; `citewise kb backfill` stores them
            "m010_structured_units",
            [_STRUCTURED_ROWS.format(key="key", find="instr", newline="char(10)")],
        ),
        (
            # a tenant's knowledge base is kept with its tenant's id, names unique per tenant,
            # instead of under the name ``t{id}.{name}`` with a kb_owners row: each owned row
            # takes its owner's id and name. SQLite cannot drop a column's UNIQUE, so the table
            # is rebuilt (foreign keys off around it, dialect.migrating), with AUTOINCREMENT
            # ids that carry on m005's counter, which goes
            "m011_kb_tenant_column",
            [
                "CREATE TABLE kbs_new (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "tenant_id INTEGER NOT NULL DEFAULT 0, name TEXT NOT NULL, config TEXT NOT NULL, "
                "created_at TEXT NOT NULL, version INTEGER NOT NULL, UNIQUE (tenant_id, name))",
                "INSERT INTO kbs_new (id, tenant_id, name, config, created_at, version) "
                "SELECT k.id, coalesce(o.tenant_id, 0), coalesce(o.name, k.name), k.config, "
                "k.created_at, k.version FROM kbs k LEFT JOIN kb_owners o ON o.kb_id = k.id",
                "INSERT INTO sqlite_sequence (name, seq) SELECT 'kbs_new', 0 "
                "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'kbs_new')",
                "UPDATE sqlite_sequence SET seq = max(seq, (SELECT coalesce(max(id), 0) "
                "FROM kb_ids)) WHERE name = 'kbs_new'",
                "DROP TABLE kb_owners",
                "DROP TABLE kb_ids",
                "DROP TABLE kbs",
                "ALTER TABLE kbs_new RENAME TO kbs",
            ],
        ),
        (
            # HTTP ingestion jobs (job_rows.py): a file's bytes wait in its row until its result
            "m012_jobs",
            [
                "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, public_id TEXT NOT NULL "
                "UNIQUE, tenant_id INTEGER NOT NULL, kb_name TEXT NOT NULL, state TEXT NOT NULL, "
                "runner TEXT, error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
                "CREATE INDEX jobs_state ON jobs (state)",
                "CREATE TABLE job_files (job_id INTEGER NOT NULL, ordinal INTEGER NOT NULL, "
                "filename TEXT NOT NULL, content BLOB, result TEXT, PRIMARY KEY (job_id, ordinal))",
            ],
        ),
        (
            # a job's lease (job_rows.py): until when, by the database's clock, its runner holds
            # it; 0 (a job running before this step) has run out
            "m013_job_leases",
            ["ALTER TABLE jobs ADD COLUMN lease_until REAL NOT NULL DEFAULT 0"],
        ),
    ],
    "mysql": [
        (
            "m001_initial",
            [
                "CREATE TABLE IF NOT EXISTS kbs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                "name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL UNIQUE, config LONGTEXT NOT NULL, "
                "created_at VARCHAR(32) NOT NULL, version BIGINT NOT NULL)" + _INNODB,
                "CREATE TABLE IF NOT EXISTS documents (kb_id BIGINT NOT NULL, "
                "doc_id VARCHAR(512) COLLATE utf8mb4_bin NOT NULL, title TEXT, source TEXT, "
                "content_hash CHAR(64) NOT NULL, ingested_at VARCHAR(32) NOT NULL, "
                "PRIMARY KEY (kb_id, doc_id), FOREIGN KEY (kb_id) REFERENCES kbs (id))" + _INNODB,
                # clustered on (kb_id, key): one knowledge base's vectors are one range scan; the
                # key is InnoDB's own full-text document id, so ranking needs no row look-ups
                "CREATE TABLE IF NOT EXISTS chunks (FTS_DOC_ID BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, "
                "kb_id BIGINT NOT NULL, doc_id VARCHAR(512) COLLATE utf8mb4_bin NOT NULL, "
                "chunk_id CHAR(20) NOT NULL, ordinal INT NOT NULL, section TEXT NOT NULL, "
                "title TEXT, text MEDIUMTEXT NOT NULL, keywords MEDIUMTEXT NOT NULL, "
                "vector MEDIUMBLOB NOT NULL, PRIMARY KEY (kb_id, FTS_DOC_ID), "
                "UNIQUE KEY FTS_DOC_ID_INDEX (FTS_DOC_ID), KEY chunks_kb_doc (kb_id, doc_id), "
                "KEY chunks_kb_chunk (kb_id, chunk_id), FULLTEXT KEY chunk_fts (keywords), "
                "FOREIGN KEY (kb_id, doc_id) REFERENCES documents (kb_id, doc_id))" + _INNODB,
            ],
        ),
        (
            "m002_query_log",
            [
                "CREATE TABLE IF NOT EXISTS query_log (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                "kb_id BIGINT NOT NULL, created_at VARCHAR(32) NOT NULL, question TEXT NOT NULL, "
                "status VARCHAR(32) NOT NULL, embedder VARCHAR(255) NOT NULL, embedding MEDIUMBLOB, "
                "record LONGTEXT NOT NULL, KEY query_log_kb_time (kb_id, created_at))" + _INNODB,
            ],
        ),
        (
            "m003_tenants",
            [
                "CREATE TABLE IF NOT EXISTS tenants (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                "name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL UNIQUE, "
                "created_at VARCHAR(32) NOT NULL)" + _INNODB,
                "CREATE TABLE IF NOT EXISTS api_keys (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                "tenant_id BIGINT NOT NULL, key_hash CHAR(64) NOT NULL UNIQUE, "
                "prefix VARCHAR(32) NOT NULL, kind VARCHAR(16) NOT NULL, "
                "kb_name VARCHAR(64) COLLATE utf8mb4_bin, origins TEXT NOT NULL, "
                "rate_per_minute INT NOT NULL, label TEXT NOT NULL, created_at VARCHAR(32) NOT NULL, "
                "revoked_at VARCHAR(32), FOREIGN KEY (tenant_id) REFERENCES tenants (id))" + _INNODB,
                # InnoDB ignores REFERENCES on a column: the foreign keys are table constraints
                "CREATE TABLE IF NOT EXISTS kb_owners (kb_id BIGINT NOT NULL PRIMARY KEY, "
                "tenant_id BIGINT NOT NULL, name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, "
                "UNIQUE KEY kb_owners_tenant_name (tenant_id, name), "
                "FOREIGN KEY (kb_id) REFERENCES kbs (id) ON DELETE CASCADE, "
                "FOREIGN KEY (tenant_id) REFERENCES tenants (id))" + _INNODB,
            ],
        ),
        (
            # one ALTER adds the four columns at once, and it comes last: MySQL 8 has no
            # ``ADD COLUMN IF NOT EXISTS``, so only a crash between it and the migration's row
            # would need a hand to finish
            "m004_query_log_v2",
            [
                "CREATE TABLE IF NOT EXISTS shadow_vectors (kb_id BIGINT NOT NULL, "
                "chunk_key BIGINT UNSIGNED NOT NULL, chunk_id CHAR(20) NOT NULL, "
                "embedder VARCHAR(255) NOT NULL, vector MEDIUMBLOB NOT NULL, "
                "PRIMARY KEY (kb_id, chunk_key))" + _INNODB,
                "ALTER TABLE query_log ADD COLUMN path VARCHAR(32), ADD COLUMN feedback TINYINT, "
                "ADD COLUMN feedback_note TEXT, ADD COLUMN feedback_at VARCHAR(32)",
            ],
        ),
        (
            # AUTO_INCREMENT / identity ids are never reused here; the step exists so every
            # backend lists the same migrations
            "m005_kb_ids_never_reused",
            [],
        ),
        (
            "m006_sentence_vectors",
            [
                "CREATE TABLE IF NOT EXISTS chunk_sentences (kb_id BIGINT NOT NULL, "
                "chunk_key BIGINT UNSIGNED NOT NULL, dtype VARCHAR(4) NOT NULL, "
                "text_keys MEDIUMBLOB NOT NULL, vectors LONGBLOB NOT NULL, "
                "PRIMARY KEY (kb_id, chunk_key))" + _INNODB,
            ],
        ),
        (
            # one ALTER, column and index together (no ``ADD COLUMN IF NOT EXISTS`` in MySQL 8)
            "m007_feedback_token",
            [
                "ALTER TABLE query_log ADD COLUMN feedback_token CHAR(64), "
                "ADD KEY query_log_token (kb_id, feedback_token)",
            ],
        ),
        (
            "m008_rate_windows",
            [
                "CREATE TABLE IF NOT EXISTS rate_windows (name VARCHAR(128) COLLATE utf8mb4_bin "
                "NOT NULL PRIMARY KEY, booked_until BIGINT NOT NULL)" + _INNODB,
            ],
        ),
        (
            "m009_contextual_sentence_vectors",
            [_LOCAL_ROWS.format(find="instr")],
        ),
        (
            # questions make the new rows meanwhile; `citewise kb backfill` stores them
            "m010_structured_units",
            [_STRUCTURED_ROWS.format(key="FTS_DOC_ID", find="INSTR", newline="CHAR(10)")],
        ),
        (
            # the ALTER (one statement, so whole or not at all) comes first: MySQL 8 has no
            # ``ADD COLUMN IF NOT EXISTS``, so a crash after it and before the migration's row
            # would need a hand to finish, as for m004
            "m011_kb_tenant_column",
            [
                "ALTER TABLE kbs ADD COLUMN tenant_id BIGINT NOT NULL DEFAULT 0, DROP INDEX name, "
                "ADD UNIQUE KEY kbs_tenant_name (tenant_id, name)",
                "UPDATE kbs k JOIN kb_owners o ON o.kb_id = k.id "
                "SET k.tenant_id = o.tenant_id, k.name = o.name",
                "DROP TABLE IF EXISTS kb_owners",
            ],
        ),
        (
            "m012_jobs",
            [
                "CREATE TABLE IF NOT EXISTS jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                "public_id VARCHAR(64) COLLATE utf8mb4_bin NOT NULL UNIQUE, tenant_id BIGINT NOT NULL, "
                "kb_name VARCHAR(64) NOT NULL, state VARCHAR(16) NOT NULL, runner VARCHAR(64), "
                "error TEXT, created_at VARCHAR(32) NOT NULL, updated_at VARCHAR(32) NOT NULL, "
                "KEY jobs_state (state))" + _INNODB,
                "CREATE TABLE IF NOT EXISTS job_files (job_id BIGINT NOT NULL, ordinal INT NOT NULL, "
                "filename TEXT NOT NULL, content LONGBLOB, result TEXT, "
                "PRIMARY KEY (job_id, ordinal))" + _INNODB,
            ],
        ),
        (
            "m013_job_leases",
            ["ALTER TABLE jobs ADD COLUMN lease_until DOUBLE NOT NULL DEFAULT 0"],
        ),
    ],
    "postgres": [
        (
            "m001_initial",
            [
                "CREATE TABLE kbs (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                "config TEXT NOT NULL, created_at TEXT NOT NULL, version BIGINT NOT NULL)",
                "CREATE TABLE documents (kb_id BIGINT NOT NULL REFERENCES kbs (id), "
                "doc_id TEXT NOT NULL, title TEXT, source TEXT, content_hash TEXT NOT NULL, "
                "ingested_at TEXT NOT NULL, PRIMARY KEY (kb_id, doc_id))",
                "CREATE TABLE chunks (chunk_key BIGSERIAL PRIMARY KEY, kb_id BIGINT NOT NULL, "
                "doc_id TEXT NOT NULL, chunk_id TEXT NOT NULL, ordinal INTEGER NOT NULL, "
                "section TEXT NOT NULL, title TEXT, text TEXT NOT NULL, vector {vector} NOT NULL, "
                "FOREIGN KEY (kb_id, doc_id) REFERENCES documents (kb_id, doc_id))",
                "CREATE INDEX chunks_kb_key ON chunks (kb_id, chunk_key)",
                "CREATE INDEX chunks_kb_doc ON chunks (kb_id, doc_id)",
                "CREATE INDEX chunks_kb_chunk ON chunks (kb_id, chunk_id)",
                # the keyword rows apart from the wide chunk rows: ranking reads ~10x fewer pages
                "CREATE TABLE chunk_terms (chunk_key BIGINT PRIMARY KEY "
                "REFERENCES chunks (chunk_key) ON DELETE CASCADE, kb_id BIGINT NOT NULL, "
                "tsv tsvector NOT NULL)",
                "CREATE INDEX chunk_terms_tsv ON chunk_terms USING gin (tsv)",
            ],
        ),
        (
            "m002_query_log",
            [
                "CREATE TABLE query_log (id BIGSERIAL PRIMARY KEY, kb_id BIGINT NOT NULL, "
                "created_at TEXT NOT NULL, question TEXT NOT NULL, status TEXT NOT NULL, "
                "embedder TEXT NOT NULL, embedding BYTEA, record TEXT NOT NULL)",
                "CREATE INDEX query_log_kb_time ON query_log (kb_id, created_at)",
            ],
        ),
        (
            "m003_tenants",
            [
                "CREATE TABLE tenants (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                "created_at TEXT NOT NULL)",
                "CREATE TABLE api_keys (id BIGSERIAL PRIMARY KEY, "
                "tenant_id BIGINT NOT NULL REFERENCES tenants (id), key_hash TEXT NOT NULL UNIQUE, "
                "prefix TEXT NOT NULL, kind TEXT NOT NULL, kb_name TEXT, origins TEXT NOT NULL, "
                "rate_per_minute INTEGER NOT NULL, label TEXT NOT NULL, created_at TEXT NOT NULL, "
                "revoked_at TEXT)",
                "CREATE TABLE kb_owners (kb_id BIGINT PRIMARY KEY REFERENCES kbs (id) ON DELETE CASCADE, "
                "tenant_id BIGINT NOT NULL REFERENCES tenants (id), name TEXT NOT NULL, "
                "UNIQUE (tenant_id, name))",
            ],
        ),
        (
            # shadow vectors have the live column's type, so switching copies them as they are
            "m004_query_log_v2",
            [
                "ALTER TABLE query_log ADD COLUMN path TEXT, ADD COLUMN feedback SMALLINT, "
                "ADD COLUMN feedback_note TEXT, ADD COLUMN feedback_at TEXT",
                "CREATE TABLE shadow_vectors (kb_id BIGINT NOT NULL, chunk_key BIGINT NOT NULL, "
                "chunk_id TEXT NOT NULL, embedder TEXT NOT NULL, vector {vector} NOT NULL, "
                "PRIMARY KEY (kb_id, chunk_key))",
            ],
        ),
        (
            # AUTO_INCREMENT / identity ids are never reused here; the step exists so every
            # backend lists the same migrations
            "m005_kb_ids_never_reused",
            [],
        ),
        (
            "m006_sentence_vectors",
            [
                "CREATE TABLE chunk_sentences (kb_id BIGINT NOT NULL, chunk_key BIGINT NOT NULL, "
                "dtype TEXT NOT NULL, text_keys BYTEA NOT NULL, vectors BYTEA NOT NULL, "
                "PRIMARY KEY (kb_id, chunk_key))",
            ],
        ),
        (
            "m007_feedback_token",
            [
                "ALTER TABLE query_log ADD COLUMN feedback_token TEXT",
                "CREATE INDEX query_log_token ON query_log (kb_id, feedback_token)",
            ],
        ),
        (
            "m008_rate_windows",
            [
                "CREATE TABLE rate_windows (name TEXT PRIMARY KEY, booked_until BIGINT NOT NULL)",
            ],
        ),
        (
            "m009_contextual_sentence_vectors",
            [_LOCAL_ROWS.format(find="strpos")],
        ),
        (
            # questions make the new rows meanwhile; `citewise kb backfill` stores them
            "m010_structured_units",
            [_STRUCTURED_ROWS.format(key="chunk_key", find="strpos", newline="chr(10)")],
        ),
        (
            "m011_kb_tenant_column",
            [
                "ALTER TABLE kbs ADD COLUMN tenant_id BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE kbs DROP CONSTRAINT kbs_name_key",
                "ALTER TABLE kbs ADD CONSTRAINT kbs_tenant_name UNIQUE (tenant_id, name)",
                "UPDATE kbs SET tenant_id = o.tenant_id, name = o.name FROM kb_owners o "
                "WHERE o.kb_id = kbs.id",
                "DROP TABLE kb_owners",
            ],
        ),
        (
            "m012_jobs",
            [
                "CREATE TABLE jobs (id BIGSERIAL PRIMARY KEY, public_id TEXT NOT NULL UNIQUE, "
                "tenant_id BIGINT NOT NULL, kb_name TEXT NOT NULL, state TEXT NOT NULL, runner TEXT, "
                "error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
                "CREATE INDEX jobs_state ON jobs (state)",
                "CREATE TABLE job_files (job_id BIGINT NOT NULL, ordinal INTEGER NOT NULL, "
                "filename TEXT NOT NULL, content BYTEA, result TEXT, PRIMARY KEY (job_id, ordinal))",
            ],
        ),
        (
            "m013_job_leases",
            ["ALTER TABLE jobs ADD COLUMN lease_until DOUBLE PRECISION NOT NULL DEFAULT 0"],
        ),
    ],
}
