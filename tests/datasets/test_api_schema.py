"""The OpenAPI schema (/api/openapi.json) and docs page (/api/docs)."""

import pytest
from django.test import Client


@pytest.mark.django_db
def test_schema_is_valid_openapi_and_documents_the_dataset_endpoints():
    from openapi_spec_validator import validate

    response = Client().get("/api/openapi.json")

    assert response.status_code == 200
    schema = response.json()
    validate(schema)
    paths = schema["paths"]
    datasets = "/api/agents/{agent_id}/eval/datasets"
    assert set(paths[datasets]) >= {"get", "post"}
    assert set(paths[datasets + "/{dataset_id}"]) >= {"get", "patch", "delete"}
    assert set(paths[datasets + "/{dataset_id}/items"]) >= {"get", "post"}
    assert set(paths[datasets + "/{dataset_id}/items/{item_id}"]) >= {"get", "patch", "delete"}
    assert "422" in paths[datasets]["post"]["responses"]
    assert schema["components"]["securitySchemes"]


@pytest.mark.django_db
def test_docs_page_is_served():
    response = Client().get("/api/docs")

    assert response.status_code == 200
    assert b"openapi.json" in response.content
