"""schemathesis drives every operation of the OpenAPI schema with generated requests (valid and
invalid) and the service answers none of them with a 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from citewise.server import create_app, get_settings
from tests.api_fixtures import ADMIN, kb_with_sample, settings_for, tenant

EXAMPLES = 25  # per operation; bounded so the suite stays quick


APP = create_app()
# loading the schema runs the app's startup, which wants an admin key; no store is opened
APP.dependency_overrides[get_settings] = lambda: settings_for(Path("never-opened.db"))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """The app on a temp store with one tenant whose knowledge base holds the sample."""
    settings = settings_for(tmp_path_factory.mktemp("schema") / "s.db")
    APP.dependency_overrides[get_settings] = lambda: settings
    with TestClient(APP) as client:
        acme = tenant(client, "acme", rate_per_minute=1_000_000)
        kb_with_sample(client, acme)
        yield APP, acme.headers
    APP.dependency_overrides.clear()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case, served) -> None:
    _, tenant_headers = served
    admin = case.path.startswith("/v1/admin") or case.path == "/metrics"
    case.call_and_validate(headers=ADMIN if admin else tenant_headers, checks=[not_a_server_error])
