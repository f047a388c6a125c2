"""Conformance tests for store backends: one class per role of ``citewise/stores/roles.py``,
so that every backend is held to the same behaviour, and the helpers they use.

    ContentConformance     knowledge bases and documents
    SearchConformance      dense and keyword search, chunks, caches across workers
    KeywordIndexConformance  the in-memory keyword index: per knowledge base, across workers
    QueryLogConformance    the query log and feedback
    ShadowConformance      replay's shadow vectors and the switch
    SentenceConformance    sentence vectors
    TenantConformance      tenants, keys, and knowledge bases per tenant
    JobConformance         ingestion jobs of the HTTP service
    StoreConformance       all of the above
    SQLTablesConformance   the tables of a ``SQLStore``: named migrations, rows really gone
    SQLStoreConformance    StoreConformance and SQLTablesConformance

and for providers, in ``citewise.testing.providers``: ``EmbedderConformance`` and
``GeneratorConformance``, which every built-in embedder and generator passes.

A backend's tests subclass one and provide a ``store`` fixture, a new, empty store (closed
afterwards)::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            s = open_store(f"sqlite:///{tmp_path}/kb.db")
            yield s
            s.close()

``reopen(store)`` opens a second store on the same database, as another worker would; override
it where ``open_store(store.url)`` cannot. ``table(store, sql)`` reads the store's tables
directly for the checks that a row is really gone; a store that is not a ``SQLStore``
overrides it. Importing this module needs pytest (a development dependency).
"""

from __future__ import annotations

from citewise.testing.content import ContentConformance
from citewise.testing.helpers import DIM, config, document, sentences
from citewise.testing.jobs import JobConformance
from citewise.testing.keywords import KeywordIndexConformance
from citewise.testing.log import QueryLogConformance, ShadowConformance
from citewise.testing.search import SearchConformance
from citewise.testing.sentences import SentenceConformance
from citewise.testing.sql import SQLTablesConformance
from citewise.testing.tenants import TenantConformance


class StoreConformance(ContentConformance, SearchConformance, KeywordIndexConformance,
                       QueryLogConformance, ShadowConformance, SentenceConformance,
                       TenantConformance, JobConformance):
    """Every role of a store."""


class SQLStoreConformance(StoreConformance, SQLTablesConformance):
    """Every role, and the tables of a ``SQLStore`` (what each backend of ``SQLStore`` runs)."""


__all__ = [
    "DIM", "ContentConformance", "JobConformance", "KeywordIndexConformance",
    "QueryLogConformance", "SQLStoreConformance", "SQLTablesConformance", "SearchConformance",
    "SentenceConformance", "ShadowConformance",
    "StoreConformance", "TenantConformance", "config", "document", "sentences",
]
