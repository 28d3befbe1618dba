"""Dynamic parse batching, in this process and in a parser process: concurrent callers
get their own trees and their own errors (one outcome per text, never raised)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from groundsearch.model.runtime.parsing import ParseError
from groundsearch.service.core.batching import ParseBatcher


@pytest.fixture(
    scope="module",
    params=[0, pytest.param(1, marks=pytest.mark.slow)],
    ids=["in-process", "parser-process"],
)
def batcher(parser, request):
    b = ParseBatcher(parser, max_batch=4, workers=request.param, warm_words=2000)
    yield b
    b.close()


def test_concurrent_callers_get_their_own_trees(batcher, parser):
    texts = [f"{n} dogs run on the beach ." for n in ("Two", "Three", "Four", "Five", "Six")] * 4
    with ThreadPoolExecutor(8) as pool:
        trees = list(pool.map(lambda t: batcher.outcomes([t])[0], texts))
    assert [t.text for t in trees] == texts
    assert trees[0] == parser.parse([texts[0]])[0]


def test_a_bad_text_fails_alone(batcher):
    def parse(text: str):
        outcome = batcher.outcomes([text])[0]
        return outcome if isinstance(outcome, ParseError) else outcome.text

    texts = ["A cat sleeps .", "\x00", "A bird sings ."] * 3  # NUL alone: no text left
    with ThreadPoolExecutor(6) as pool:
        out = list(pool.map(parse, texts))
    for text, result in zip(texts, out, strict=True):
        if text == "\x00":
            assert isinstance(result, ParseError)
        else:
            assert result == text


def test_several_texts_in_one_call_each_get_their_outcome(batcher):
    trees = batcher.outcomes(["A cat sleeps .", "A bird sings ."])
    assert [t.root.text for t in trees] == ["sleeps", "sings"]
    tree, error = batcher.outcomes(["A cat sleeps .", "\x00"])
    assert tree.root.text == "sleeps" and isinstance(error, ParseError)
