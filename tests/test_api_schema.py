"""schemathesis drives every operation of the OpenAPI schema with generated requests (valid and
invalid), once with a tenant key and once with a widget key: the service answers none of them
with a 5xx, and every answer conforms to the schema (its status, content type, headers and
body are the ones the schema documents)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from citewise.server import create_app, get_settings
from tests.api_fixtures import ADMIN, kb_with_sample, settings_for, tenant

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

EXAMPLES = 25  # per operation and key; bounded so the suite stays quick
ORIGIN = "https://shop.example"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]

APP = create_app()
# loading the schema runs the app's startup, which wants an admin key and opens the store to
# resume its ingestion jobs: a store in a temporary folder
APP.dependency_overrides[get_settings] = lambda: settings_for(
    Path(tempfile.mkdtemp(prefix="citewise-schema-")) / "startup.db")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory):
    """The app on a temp store with one tenant whose knowledge base holds the sample, and the
    headers of its tenant key and of a widget key for that knowledge base."""
    settings = settings_for(tmp_path_factory.mktemp("schema") / "s.db")
    APP.dependency_overrides[get_settings] = lambda: settings
    with TestClient(APP) as client:
        acme = tenant(client, "acme", rate_per_minute=1_000_000)
        kb_with_sample(client, acme)
        widget = tenant(client, "acme", kind="widget", kb="docs", origins=[ORIGIN],
                        rate_per_minute=1_000_000)
        yield {"tenant": acme.headers, "widget": {**widget.headers, "Origin": ORIGIN}}
    APP.dependency_overrides.clear()


def _headers(case, keys: dict, kind: str) -> dict:
    if kind == "tenant" and (case.path.startswith("/v1/admin") or case.path == "/metrics"):
        return ADMIN
    return keys[kind]


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_tenant_key_requests_conform(case, keys) -> None:
    case.call_and_validate(headers=_headers(case, keys, "tenant"), checks=CHECKS)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_widget_key_requests_conform(case, keys) -> None:
    """The widget key everywhere, admin routes too: each answer is a documented one (403s)."""
    case.call_and_validate(headers=_headers(case, keys, "widget"), checks=CHECKS)
