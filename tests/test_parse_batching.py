"""Dynamic parse batching: concurrent callers get their own trees and their own errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from model.parsing import ParseError
from service.batching import ParseBatcher


@pytest.fixture(scope="module")
def batcher(parser):
    b = ParseBatcher(parser, max_batch=4)
    yield b
    b.close()


def test_concurrent_callers_get_their_own_trees(batcher):
    texts = [f"{n} dogs run on the beach ." for n in ("Two", "Three", "Four", "Five", "Six")] * 4
    with ThreadPoolExecutor(8) as pool:
        trees = list(pool.map(batcher.parse, texts))
    assert [t.text for t in trees] == texts
    assert all(t.root.text == "run" for t in trees)


def test_a_bad_text_fails_alone(batcher):
    def parse(text: str):
        try:
            return batcher.parse(text).text
        except ParseError as exc:
            return exc

    texts = ["A cat sleeps .", "\x00", "A bird sings ."] * 3  # NUL alone: no text left
    with ThreadPoolExecutor(6) as pool:
        out = list(pool.map(parse, texts))
    for text, result in zip(texts, out, strict=True):
        if text == "\x00":
            assert isinstance(result, ParseError)
        else:
            assert result == text
