"""The text front door on the real parser and the shipped checkpoint: each reason a text
is refused, the per-text fallback, order, vectors, and one cleaning per text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime import sentences
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.parsing import ParseError
from groundsearch.model.runtime.parsing.parser import MAX_TEXT_CHARS
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.sentences import Sentences, UnusableText, clean, labels, parse_each

DOG = "A dog runs on the beach."
KIDS = "Two children play in the snow."
SPOILER = "a text this parser cannot read"


@pytest.fixture(scope="module")
def model(parser):
    return load_checkpoint(get_settings().default_checkpoint, parser=parser.version)


@pytest.fixture(scope="module")
def door(model, parser):
    return Sentences(model, parser.parse)


class Spoiling:
    """The real parser, but a batch holding ``SPOILER`` fails as a whole (ParseError),
    as a stanza batch a text breaks would; the calls are counted."""

    def __init__(self, parser):
        self.parser, self.calls = parser, []

    def __call__(self, texts: Sequence[str]) -> list[DependencyTree]:
        self.calls.append(list(texts))
        if SPOILER in texts:
            raise ParseError("the parser choked")
        return self.parser.parse(texts)


def reason(door: Sentences, text: str) -> str:
    with pytest.raises(UnusableText) as caught:
        door.trees([text])
    return caught.value.reason


def test_a_text_over_the_limit_is_too_long(door):
    with pytest.raises(UnusableText, match="text is 2001 characters long; the limit is 2000"):
        door.trees(["a" * (MAX_TEXT_CHARS + 1)])
    assert reason(door, "a" + " " * MAX_TEXT_CHARS + "b") == "too-long"  # the raw length


def test_a_text_nfc_lengthens_past_the_limit_is_too_long_not_wordless():
    qa = "\u0958"  # Devanagari QA: NFC writes it as two characters
    with pytest.raises(UnusableText, match="3000 characters long") as caught:
        clean(qa * 1500)
    assert caught.value.reason == "too-long"


@pytest.mark.parametrize("text", ["", "  ", "\t\n", "...", " ?! "])
def test_empty_blank_and_punctuation_only_texts_have_no_words(door, text):
    assert reason(door, text) == "no-words"


def test_a_text_of_unknown_words_is_refused_with_the_users_message(door):
    with pytest.raises(UnusableText) as caught:
        door.vectors(["qzxv"], ["query"])
    assert caught.value.reason == "unknown-words"
    assert str(caught.value).startswith("query has no word the model knows: write a phrase")
    # no-words reads the same to a user
    assert str(UnusableText("query", "no-words")) == str(caught.value)


def test_a_batch_one_text_spoils_is_parsed_again_text_by_text(model, parser):
    parse = Spoiling(parser)
    found = Sentences(model, parse).outcomes([DOG, SPOILER, KIDS], labels(3))
    assert [o.text for o in found] == [DOG, SPOILER, KIDS]
    assert found[0].tree is not None and found[0].tree.text == DOG
    assert found[2].tree is not None and found[2].tree.text == KIDS
    assert found[1].tree is None and found[1].error is not None
    assert found[1].error.reason == "unparsable"
    assert str(found[1].error) == "caption 2: the parser choked"
    # one batch, then each text alone
    assert parse.calls == [[DOG, SPOILER, KIDS], [DOG], [SPOILER], [KIDS]]


def test_a_parse_callable_may_answer_a_parse_error_in_the_texts_place(parser):
    def batcher(texts: Sequence[str]) -> list[DependencyTree | BaseException]:
        return [ParseError("no") if t == SPOILER else parser.parse([t])[0] for t in texts]

    outcomes = parse_each(batcher, [DOG, SPOILER])
    assert isinstance(outcomes[0], DependencyTree) and isinstance(outcomes[1], ParseError)


def test_a_crashed_parser_is_no_verdict_on_the_text(parser):
    def crashed(texts: Sequence[str]) -> list[DependencyTree | BaseException]:
        return [RuntimeError("worker died") for _ in texts]

    with pytest.raises(RuntimeError, match="worker died"):
        Sentences(None, crashed).outcomes([DOG])


def test_every_reason_in_one_batch_keeps_the_order(model, parser):
    texts = ["...", KIDS, "qzxv", SPOILER, "b" * (MAX_TEXT_CHARS + 1), DOG]
    found = Sentences(model, Spoiling(parser)).outcomes(texts)
    assert [o.text for o in found] == texts
    assert [o.error.reason if o.error else o.tree and o.tree.text for o in found] == [
        "no-words",
        KIDS,
        "unknown-words",
        "unparsable",
        "too-long",
        DOG,
    ]


def test_trees_raise_for_the_first_refused_text(door):
    with pytest.raises(UnusableText, match=r"^caption 2 has no word") as caught:
        door.trees([DOG, "qzxv", "..."], labels(3))
    assert caught.value.what == "caption 2"


def test_without_a_model_every_parsable_text_gives_a_tree(parser):
    trees = Sentences(None, parser.parse).trees(["qzxv", DOG])
    assert [t.text for t in trees] == ["qzxv", DOG]
    with pytest.raises(AssertionError):
        Sentences(None, parser.parse).vectors([DOG])


def test_vectors_are_the_models_sentence_vectors_of_the_parses(door, model, parser):
    texts = [DOG, KIDS, "  A   man\trides a\x00bike. "]
    expected = model.embed_sentences(parser.parse([DOG, KIDS, "A man rides a bike."]))
    np.testing.assert_allclose(door.vectors(texts), expected, rtol=1e-5, atol=1e-6)


def test_usable_vectors_leave_refused_texts_out(door, model, parser):
    texts = [DOG, "qzxv", "  ", KIDS, "..."]
    kept, vectors, refused = door.usable_vectors(texts, chunk=2)  # chunks keep the order
    assert kept == [DOG, KIDS]
    np.testing.assert_allclose(
        vectors, model.embed_sentences(parser.parse([DOG, KIDS])), rtol=1e-5, atol=1e-6
    )
    assert [e.reason for e in refused] == ["unknown-words", "no-words", "no-words"]
    usable, why = door.usable(texts)
    assert [text for text, _ in usable] == [DOG, KIDS] and len(why) == 3


def test_usable_vectors_of_nothing_usable_are_empty(door):
    kept, vectors, refused = door.usable_vectors(["qzxv", ""])
    assert kept == [] and len(vectors) == 0 and len(refused) == 2


def test_each_text_is_cleaned_once_and_parsed_as_cleaned(model, parser, monkeypatch):
    cleaned: list[object] = []
    real = sentences.clean_text

    def counting(text: object, max_chars: int = MAX_TEXT_CHARS) -> str:
        cleaned.append(text)
        return real(text, max_chars)

    monkeypatch.setattr(sentences, "clean_text", counting)
    parse = Spoiling(parser)
    door = Sentences(model, parse)
    raw = [" A dog\n runs on  the beach. ", KIDS, "qzxv"]
    door.vectors(raw[:2])
    door.usable(raw)
    assert cleaned == raw[:2] + raw
    assert parse.calls[0] == [DOG, KIDS]  # batched, as cleaned
    cleaned.clear()
    door.vectors([DOG], cleaned=True)  # the caller cleaned already (a query cache's key)
    assert cleaned == []


def test_labels_name_one_text_alone_and_many_by_number():
    assert labels(1) == ["caption"]
    assert labels(3, "text") == ["text 1", "text 2", "text 3"]
