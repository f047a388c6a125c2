"""``TenantConformance``: ``store.tenants`` (tenants and keys) and knowledge bases per tenant."""

from __future__ import annotations

import pytest

from citewise.errors import (
    AlreadyExistsError,
    ConfigError,
    KnowledgeBaseError,
    TenantError,
    TenantExistsError,
)
from citewise.stores.roles import Store
from citewise.tenancy import hash_token
from citewise.testing.helpers import Conformance, config, document


class TenantConformance(Conformance):
    def test_keys_are_random_hashed_scoped_and_revocable(self, store: Store) -> None:
        tenants = store.tenants
        acme = tenants.create_tenant("acme")
        with pytest.raises(TenantExistsError, match="already exists"):
            tenants.create_tenant("acme")
        with pytest.raises(TenantError, match="No tenant named 'nobody'"):
            tenants.get_tenant("nobody")
        key, token = tenants.create_key(acme, "tenant", None, (), 60, "ci")
        widget, token2 = tenants.create_key(acme, "widget", "docs", ("https://a.example",), 10)
        assert token != token2 and token.startswith("cw_") and len(token) > 40
        assert widget.origins == ("https://a.example",) and widget.kb == "docs"
        assert tenants.widget_origins() == {"https://a.example"}  # what CORS may answer
        assert tenants.key_for_token(token) == key and tenants.key_for_token(token2) == widget
        assert tenants.key_for_token(token + "x") is None
        stored = self.table(store, "SELECT key_hash FROM api_keys ORDER BY id")
        assert [r[0] for r in stored] == [hash_token(token), hash_token(token2)]
        other = tenants.create_tenant("other")
        assert not tenants.revoke_key(other, key.id)  # not theirs to revoke
        assert tenants.revoke_key(acme, key.id) and not tenants.revoke_key(acme, key.id)
        assert tenants.key_for_token(token) is None
        assert [k.revoked_at is not None for k in tenants.list_keys(acme)] == [True, False]
        assert tenants.list_keys(other) == []
        assert [t.name for t in tenants.list_tenants()] == ["acme", "other"]
        with pytest.raises(ConfigError, match="cannot be stored"):
            tenants.create_key(acme, "tenant", None, (), 60, "label \x00")
        assert tenants.revoke_key(acme, widget.id) and tenants.widget_origins() == set()

    def test_two_tenants_and_the_operator_each_have_their_own_docs(self, store: Store) -> None:
        acme, other = store.tenants.create_tenant("acme"), store.tenants.create_tenant("other")
        kbs = {t: store.create_kb("docs", config(), tenant=t) for t in (0, acme.id, other.id)}
        assert len({kb.id for kb in kbs.values()}) == 3
        for t, kb in kbs.items():
            assert (kb.name, kb.tenant_id) == ("docs", t) and store.get_kb("docs", t) == kb
            assert store.list_kbs(t) == [kb]
            store.put_document(kb, *document("a.md", f"notes of tenant{t}"))
        with pytest.raises(AlreadyExistsError, match="'docs' already exists"):
            store.create_kb("docs", config(), tenant=acme.id)
        only = store.create_kb("only", config(), tenant=acme.id)
        with pytest.raises(KnowledgeBaseError, match="No knowledge base named 'only'") as err:
            store.get_kb("only", tenant=other.id)
        assert "acme" not in str(err.value) and f"t{acme.id}" not in str(err.value)
        hits = store.keyword(kbs[other.id], [f"tenant{acme.id}", "notes"], 10)
        assert [store.chunks(kbs[other.id], [k])[k].text for k, _ in hits] == [f"notes of tenant{other.id}"]
        store.update_kb("docs", config(), tenant=acme.id)
        store.delete_kb("docs", tenant=acme.id)
        assert store.list_kbs(acme.id) == [only] and store.get_kb("docs") == kbs[0]
        assert store.get_kb("docs", other.id) == kbs[other.id]

    def test_deleting_a_tenants_kb_removes_it_with_its_log(self, store: Store) -> None:
        acme = store.tenants.create_tenant("acme")
        kb = store.create_kb("docs", config(), tenant=acme.id)
        qid = store.log_query(kb, {"question": "q", "status": "answered"}, None)
        store.add_feedback(kb, qid, True)
        store.delete_kb("docs", tenant=acme.id)
        assert store.list_kbs(acme.id) == []
        assert self.table(store, "SELECT count(*) FROM query_log")[0][0] == 0
        again = store.create_kb("docs", config(), tenant=acme.id)
        assert again.id != kb.id and store.list_kbs(acme.id) == [again]
        assert store.query_log(again) == []
