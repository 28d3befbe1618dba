"""The trained stanza models parse the paper's sentences to their UD analysis."""

from __future__ import annotations

import pytest

from groundsearch.model.runtime.parsing import DependencyTree, ParseError

HELMET = "A man wearing a helmet jumps on his bike near a beach."
STUDENTS = "Students ride bikes at night."


def by_word(tree: DependencyTree) -> dict[str, object]:
    return {n.text: n for n in tree}


def test_students_ride_bikes_at_night(parser):
    tree = parser.parse_one(STUDENTS)
    w = by_word(tree)
    assert tree.words == ["Students", "ride", "bikes", "at", "night", "."]
    assert tree.root.text == "ride"
    assert (w["Students"].deprel, w["Students"].head) == ("nsubj", 2)
    assert (w["bikes"].deprel, w["bikes"].head) == ("obj", 2)
    assert (w["at"].deprel, w["at"].head) == ("case", 5)
    assert (w["night"].collapsed, w["night"].head) == ("obl:at", 2)
    assert [n.size for n in tree] == [1, 6, 1, 1, 2, 1]


def test_man_wearing_a_helmet_jumps_on_his_bike(parser):
    tree = parser.parse_one(HELMET)
    w = by_word(tree)
    assert tree.root.text == "jumps"
    assert w["man"].deprel == "nsubj" and tree[w["man"].head].text == "jumps"
    assert w["wearing"].deprel.startswith("acl") and tree[w["wearing"].head].text == "man"
    assert w["helmet"].deprel == "obj" and tree[w["helmet"].head].text == "wearing"
    assert tree[w["on"].head].text == "bike" and w["on"].deprel == "case"
    assert w["bike"].collapsed == "obl:on" and tree[w["bike"].head].text == "jumps"
    assert w["his"].deprel == "nmod:poss"
    # "near a beach" may attach to the verb or to the bike; either way it is collapsed.
    assert w["beach"].collapsed in {"obl:near", "nmod:near"}
    assert tree[w["beach"].head].text in {"jumps", "bike"}
    assert tree.root.size == len(tree) == 13  # twelve words and the full stop
    assert w["man"].size == 5  # A man wearing a helmet


def test_batch_keeps_order_and_cache_returns_identical_trees(parser):
    texts = [STUDENTS, HELMET, "Two dogs play in the snow."]
    first = parser.parse(texts)
    assert [t.text for t in first] == texts
    assert len(parser.cache) >= 3
    again = parser.parse(list(reversed(texts)))
    assert list(reversed(again)) == first


def test_cache_survives_a_new_parser(parser):
    from groundsearch.model.runtime.parsing import Parser

    tree = parser.parse_one("A girl climbs a rock wall.")
    fresh = Parser(parser_dir=parser.parser_dir, cache_dir=parser.cache_dir)
    fresh._pipeline = "never used"  # a cache hit must not touch the pipeline
    assert fresh.parse_one("A girl climbs a rock wall.") == tree


@pytest.mark.parametrize("text", ["", "   ", "\n\t \r", "\x00\x01\x02"])
def test_empty_text_is_a_clear_error(parser, text):
    with pytest.raises(ParseError, match="empty"):
        parser.parse_one(text)


def test_over_long_text_is_a_clear_error(parser):
    with pytest.raises(ParseError, match="10000 characters long; the limit is 2000"):
        parser.parse_one("a" * 10_000)


def test_non_string_is_a_clear_error(parser):
    with pytest.raises(ParseError, match="must be a string"):
        parser.parse([None])  # type: ignore[list-item]
    with pytest.raises(ParseError, match="list of texts"):
        parser.parse(STUDENTS)


@pytest.mark.parametrize(
    "text",
    [
        "A dog 🐕 runs on the beach 🏖️!",
        "A man\x07 rides\x1b a horse.",
        "Un chien court dans le parc.",
        "一只狗在公园里跑。",
        "Der Hund läuft über die Straße.",
        "!!!",
        "http://example.com/" + "x" * 150,
        "A dog runs. A cat sleeps. The birds fly away.",
    ],
)
def test_odd_but_valid_text_gets_a_valid_tree(parser, text):
    tree = parser.parse_one(text)
    assert len(tree) >= 1
    assert sum(1 for n in tree if n.head == 0) == 1
    assert tree.root.size == len(tree)
    assert all(0 <= n.head <= len(tree) for n in tree)
    assert all("\x07" not in n.text and "\x1b" not in n.text for n in tree)


def test_several_sentences_become_one_tree(parser):
    tree = parser.parse_one("A dog runs. A cat sleeps.")
    assert tree.sentences == 2
    assert [n.deprel for n in tree].count("parataxis") >= 1


@pytest.mark.slow
def test_worker_processes_give_the_same_trees(parser):
    from groundsearch.common.settings import get_settings
    from groundsearch.model.data import load_captioned_images
    from groundsearch.model.runtime.parsing import Parser

    captions = list(
        load_captioned_images(get_settings().data_dir / "flickr8k", split="dev").captions[:40]
    )
    single = Parser(parser.parser_dir, parser.cache_dir, use_cache=False)
    assert single.parse(captions, batch_size=8, workers=2) == single.parse(captions)
