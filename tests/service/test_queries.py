"""Query texts through the text front door: cleaned once per query, cached by the
cleaned text."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from groundsearch.model.runtime import sentences
from groundsearch.service.http.app import create_app


@pytest.fixture(scope="module")
def client(service_components):
    with TestClient(create_app(service_components.settings, service_components)) as c:
        yield c


def test_a_query_is_cleaned_once(client, monkeypatch):
    calls: list[str] = []
    clean_text = sentences.clean_text

    def counted(text, *args):
        calls.append(text)
        return clean_text(text, *args)

    monkeypatch.setattr(sentences, "clean_text", counted)
    for route in ("/search", "/paraphrase"):
        calls.clear()
        assert client.post(route, params={"text": "Two  dogs\tplay ."}).status_code == 200
        assert calls == ["Two  dogs\tplay ."], route
    calls.clear()
    assert client.get("/explain", params={"text": "A cat sleeps ."}).status_code == 200
    assert calls == ["A cat sleeps ."]


def test_the_cache_is_keyed_by_the_cleaned_text(client, service_components):
    queries = service_components.queries
    assert not queries.is_cached("a red kite flies")
    first = client.post("/search", params={"text": "a red kite flies"})
    assert queries.is_cached(queries.clean("a  red\u00a0kite\n flies"))
    again = client.post("/search", params={"text": "a  red kite\n flies"})
    assert "parse" in first.json()["timings_ms"] and "parse" not in again.json()["timings_ms"]
    assert again.json()["results"] == first.json()["results"]
