"""How the app answers a text the front door refuses: the reason decides the status."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from groundsearch.model.runtime.sentences import UnusableText
from groundsearch.service.http.app import create_app


@pytest.mark.parametrize(
    ("reason", "detail", "status", "slug", "message"),
    [
        ("too-long", "9 characters long; the limit is 5", 422, "invalid-text",
         "text is 9 characters long; the limit is 5"),
        ("unparsable", "the text contains no words", 422, "invalid-text",
         "text: the text contains no words"),
        ("no-words", "", 404, "unusable-text", "text has no word the model knows: write"),
        ("unknown-words", "", 404, "unusable-text", "text has no word the model knows: write"),
    ],
)  # fmt: skip
def test_an_unusable_text_is_answered_by_its_reason(
    service_components, monkeypatch, reason, detail, status, slug, message
):
    def refuse(cleaned):
        raise UnusableText("text", reason, detail)

    with TestClient(create_app(service_components.settings, service_components)) as client:
        monkeypatch.setattr(client.app.state.capabilities.explain, "run", refuse)
        res = client.get("/explain", params={"text": "a dog"})
    assert res.status_code == status and res.headers["content-type"] == "application/problem+json"
    body = res.json()
    assert body["type"] == f"/problems/{slug}" and body["detail"].startswith(message)
