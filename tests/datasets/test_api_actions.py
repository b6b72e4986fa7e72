"""The dataset pages' actions in the API (datasets/api_actions.py, and the Idempotency-Key of
datasets/api.py's creations): generate, upload, cancel a mapping, dismiss warnings, import and
export, move a case, attach and detach documents. The pages' forms and messages, team
isolation, tokens and idempotency keys."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounts.services import api_token_create
from datasets.models import Dataset, Document, TestCase
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root, stored_files  # noqa: F401
from tests.datasets.test_extraction_mapping import _plan_workbook
from tests.datasets.test_upload import temp_files  # noqa: F401
from tests.factories import DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider(charlie):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=charlie, name='x')[1]}"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _url(name, *args):
    return reverse(f"api:{name}", args=args)


def _json(client, url, body, auth, **headers):
    return client.post(url, body, content_type="application/json", **auth, **headers)


def _messages(response):
    return [error["msg"] for error in response.json()["detail"]]


# ---- creations with an Idempotency-Key ---------------------------------------------------------------


def test_creating_a_dataset_twice_with_one_key_makes_one(client, auth, agent):
    url = f"/api/agents/{agent.pk}/eval/datasets"
    first = _json(client, url, {"name": "Billing"}, auth, HTTP_IDEMPOTENCY_KEY="d1")
    second = _json(client, url, {"name": "Billing"}, auth, HTTP_IDEMPOTENCY_KEY="d1")

    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert Dataset.objects.filter(agent=agent).count() == 1


def test_adding_a_case_twice_with_one_key_adds_one(client, auth, dataset):
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/items"
    body = {"question": "Refund window?", "expected_answer": "30 days."}
    first = _json(client, url, body, auth, HTTP_IDEMPOTENCY_KEY="c1")
    second = _json(client, url, body, auth, HTTP_IDEMPOTENCY_KEY="c1")
    third = _json(client, url, body, auth)

    assert (first.status_code, second.status_code, third.status_code) == (201, 200, 201)
    assert first.json()["id"] == second.json()["id"] != third.json()["id"]
    assert dataset.cases.count() == 2


# ---- generate ----------------------------------------------------------------------------------------


def test_generate_starts_one_dataset_per_key(client, auth, agent, fake_llm, django_capture_on_commit_callbacks):
    url = _url("datasets_generate", agent.pk)
    body = {"name": "Pricing edge cases", "count": 3, "instructions": "Focus on pricing"}
    with django_capture_on_commit_callbacks():
        first = _json(client, url, body, auth, HTTP_IDEMPOTENCY_KEY="g1")
        second = _json(client, url, body, auth, HTTP_IDEMPOTENCY_KEY="g1")

    assert first.status_code == 202, first.json()
    assert first.json()["status"] == "extracting" and first.json()["source"] == "generated"
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert Dataset.objects.filter(agent=agent).count() == 1


def test_generate_answers_the_forms_messages(client, auth, agent, dataset, fake_llm):
    url = _url("datasets_generate", agent.pk)

    too_many = _json(client, url, {"name": "X", "count": 500}, auth)
    taken = _json(client, url, {"name": dataset.name, "count": 3}, auth)

    assert too_many.status_code == 422 and too_many.json()["detail"][0]["loc"][-1] == "count"
    assert taken.status_code == 422
    assert Dataset.objects.filter(agent=agent).count() == 1


def test_generate_without_a_model_says_so(client, auth, agent, no_llm):
    response = _json(client, _url("datasets_generate", agent.pk), {"name": "X", "count": 3}, auth)

    assert response.status_code == 409 and response.json()["detail"].startswith("Generating test cases needs a model")
    assert not Dataset.objects.filter(source=Dataset.Source.GENERATED).exists()


# ---- upload, the mapping's cancel, warnings ----------------------------------------------------------


def test_an_upload_makes_an_extracting_dataset_once_per_key(
    client,
    auth,
    agent,
    media_root,  # noqa: F811
    no_llm,
    django_capture_on_commit_callbacks,
):
    url = _url("datasets_upload", agent.pk)
    # A retry sends the same bytes: a workbook built twice may differ in size (its timestamps
    # compress differently), and a different file under the same key is refused with 422.
    workbook = _plan_workbook()

    def post():
        body = {"name": "Support plan", "file": files.upload("plan.xlsx", workbook)}
        return client.post(url, body, **auth, HTTP_IDEMPOTENCY_KEY="u1")

    with django_capture_on_commit_callbacks():
        first, second = post(), post()

    assert first.status_code == 202, first.content
    assert first.json()["status"] == "extracting" and first.json()["source"] == "upload"
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert len(stored_files(media_root)) == 1


def test_an_upload_gets_the_pages_checks(client, auth, agent, media_root, no_llm):  # noqa: F811
    url = _url("datasets_upload", agent.pk)

    nameless = client.post(url, {"file": files.upload("plan.md", b"# Plan\n")}, **auth)
    empty = client.post(url, {"name": "X", "file": SimpleUploadedFile("plan.md", b"")}, **auth)

    assert nameless.status_code == 422 and _messages(nameless) == ["Give the dataset a name."]
    assert empty.status_code == 422
    assert not Dataset.objects.exists() and stored_files(media_root) == []


def test_cancel_an_upload_waiting_for_its_mapping(client, auth, agent, media_root, no_llm):  # noqa: F811
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)

    response = _json(client, _url("datasets_mapping_cancel", agent.pk, dataset.pk), {}, auth)

    assert response.status_code == 200
    assert response.json()["message"] == "Cancelled the upload of “plan.xlsx”. Nothing was created."
    assert not Dataset.objects.filter(pk=dataset.pk).exists()


def test_cancel_refuses_a_ready_dataset_with_the_pages_message(client, auth, dataset):
    response = _json(client, _url("datasets_mapping_cancel", dataset.agent_id, dataset.pk), {}, auth)

    assert response.status_code == 409
    assert response.json()["detail"] == "Only an upload waiting for its mapping can be cancelled."


def test_dismiss_the_import_warnings(client, auth, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(warnings=[{"where": "plan.xlsx", "message": "A doubt."}])

    response = _json(client, _url("datasets_warnings_dismiss", dataset.agent_id, dataset.pk), {}, auth)

    assert response.status_code == 200 and response.json()["warnings"] == []


# ---- import and export -----------------------------------------------------------------------------


def test_csv_import_then_export(client, auth, dataset):
    upload = SimpleUploadedFile("cases.csv", b"question,expected_answer\nA?,a\nB?,b\n")

    response = client.post(_url("datasets_import_csv", dataset.agent_id, dataset.pk), {"file": upload}, **auth)

    assert response.status_code == 200, response.content
    assert "2" in response.json()["message"] and dataset.cases.count() == 2
    exported = client.get(_url("datasets_export_csv", dataset.agent_id, dataset.pk), **auth)
    assert exported.status_code == 200 and "A?" in exported.content.decode()
    as_json = client.get(_url("datasets_export_json", dataset.agent_id, dataset.pk), **auth)
    assert as_json.status_code == 200 and len(as_json.json()["eval_cases"]) == 2


def test_an_import_with_warnings_says_the_first_in_its_answer(client, auth, dataset):
    """Where an API caller is: the answer names the first warning's row; the dataset lists them all."""
    upload = SimpleUploadedFile("cr.csv", b"question,expected_answer\nOne?,1\nTwo\rstill two?,2\n")

    response = client.post(_url("datasets_import_csv", dataset.agent_id, dataset.pk), {"file": upload}, **auth)

    assert response.status_code == 200
    assert response.json()["level"] == "warning"
    assert "the first: row 3: A cell holds a lone carriage return" in response.json()["message"]
    detail = client.get(f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}", **auth).json()
    assert detail["warnings"][0]["where"] == "cr.csv, row 3"


def test_an_import_of_the_wrong_kind_answers_the_dialogs_message(client, auth, dataset):
    upload = SimpleUploadedFile("cases.pdf", b"%PDF-1.4")

    response = client.post(_url("datasets_import_json", dataset.agent_id, dataset.pk), {"file": upload}, **auth)
    missing = client.post(_url("datasets_import_json", dataset.agent_id, dataset.pk), {}, **auth)

    assert response.status_code == 422 and _messages(response) == ["Choose a .json file (this one is “.pdf”)."]
    assert _messages(missing) == ["Choose a file to import."]


# ---- a case's place and documents -------------------------------------------------------------------------


def test_move_a_case_to_the_top(client, auth, dataset):
    cases = [TestCaseFactory(dataset=dataset, position=n) for n in range(3)]

    response = _json(
        client, _url("datasets_case_move", dataset.agent_id, dataset.pk, cases[2].pk), {"direction": "top"}, auth
    )
    bad = _json(client, _url("datasets_case_move", dataset.agent_id, dataset.pk, cases[2].pk), {"direction": "x"}, auth)

    assert response.status_code == 200 and response.json() == {"id": cases[2].pk, "number": 1}
    assert list(TestCase.objects.filter(dataset=dataset).order_by("position").values_list("pk", flat=True)) == [
        cases[2].pk,
        cases[0].pk,
        cases[1].pk,
    ]
    assert bad.status_code == 422


def test_attach_and_detach_a_document(client, auth, dataset, media_root):  # noqa: F811
    case = TestCaseFactory(dataset=dataset)
    url = _url("datasets_case_document_attach", dataset.agent_id, dataset.pk, case.pk)

    def attach():
        upload = files.upload("invoice.pdf", files.pdf_bytes([["Total: 12 EUR"]]))
        return client.post(url, {"file": upload}, **auth, HTTP_IDEMPOTENCY_KEY="a1")

    first, second = attach(), attach()

    assert first.status_code == 201, first.content
    assert first.json()["name"] == "invoice.pdf" and second.status_code == 200
    assert second.json()["id"] == first.json()["id"] and case.documents.count() == 1
    detach = _url("datasets_case_document_detach", dataset.agent_id, dataset.pk, case.pk, first.json()["id"])
    assert client.delete(detach, **auth).status_code == 204
    assert case.documents.count() == 0
    assert client.delete(detach, **auth).status_code == 404  # its last case let it go: the file is deleted
    kept = Document.objects.create(team=dataset.agent.team, dataset=dataset, file="documents/x.pdf",
                                   original_name="x.pdf", file_type="pdf")  # fmt: skip
    not_attached = _url("datasets_case_document_detach", dataset.agent_id, dataset.pk, case.pk, kept.pk)
    assert client.delete(not_attached, **auth).status_code == 204  # idempotent: nothing to take off


def test_an_attachment_gets_the_uploads_checks(client, auth, dataset, media_root):  # noqa: F811
    case = TestCaseFactory(dataset=dataset)
    url = _url("datasets_case_document_attach", dataset.agent_id, dataset.pk, case.pk)

    response = client.post(url, {"file": files.upload("invoice.pdf", files.pe_executable())}, **auth)

    assert response.status_code == 422 and case.documents.count() == 0


# ---- who may call ------------------------------------------------------------------------------------


def test_another_teams_dataset_is_a_404_and_no_token_a_401(client, outsider, dataset):
    case = TestCaseFactory(dataset=dataset)
    a, d = dataset.agent_id, dataset.pk
    posts = [
        (_url("datasets_generate", a), {"name": "X", "count": 3}),
        (_url("datasets_mapping_cancel", a, d), {}),
        (_url("datasets_warnings_dismiss", a, d), {}),
        (_url("datasets_case_move", a, d, case.pk), {"direction": "top"}),
    ]
    for url, body in posts:
        assert _json(client, url, body, outsider).status_code == 404, url
        assert _json(client, url, body, {}).status_code == 401, url
    uploads = [
        _url("datasets_upload", a),
        _url("datasets_import_csv", a, d),
        _url("datasets_case_document_attach", a, d, case.pk),
    ]
    for url in uploads:
        assert client.post(url, {"file": SimpleUploadedFile("a.csv", b"question\nA?\n")}, **outsider).status_code == 404
    assert client.get(_url("datasets_export_json", a, d), **outsider).status_code == 404
    assert client.delete(_url("datasets_case_document_detach", a, d, case.pk, 1), **outsider).status_code == 404


def test_an_upload_over_the_limit_is_refused_before_it_is_stored(
    client,
    auth,
    agent,
    media_root,  # noqa: F811
    settings,
    temp_files,  # noqa: F811
):
    settings.UPLOAD_MAX_BYTES = 1000

    response = client.post(
        _url("datasets_upload", agent.pk), {"name": "Big", "file": files.upload("plan.xlsx", b"x" * 300_000)}, **auth
    )

    assert response.status_code == 422
    assert _messages(response) == ["The file is 0.3 MB; the limit is 0.001 MB."]
    assert temp_files == [] and not Dataset.objects.exists()
