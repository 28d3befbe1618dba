"""Trees built from CoNLL-U columns: ℓ(i), collapsed relations, serialization."""

from __future__ import annotations

import pytest

from groundsearch.model.runtime.parsing.tree import (
    DependencyTree,
    collapse_relations,
    subtree_sizes,
)
from tests.paper_trees import HEADS, RELS, WORDS
from tests.paper_trees import students as students_tree


def test_subtree_sizes_count_words_under_each_node():
    assert subtree_sizes(HEADS) == [1, 6, 1, 1, 2, 1]


def test_subtree_sizes_reject_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        subtree_sizes([2, 1, 0])


def test_case_word_is_folded_into_the_relation():
    assert collapse_relations(WORDS, HEADS, RELS) == [
        "nsubj",
        "root",
        "obj",
        "case",
        "obl:at",
        "punct",
    ]


def test_multiword_marker_keeps_its_fixed_parts():
    words = ["He", "left", "because", "of", "rain"]
    heads = [2, 0, 5, 3, 2]
    rels = ["nsubj", "root", "case", "fixed", "obl"]
    assert collapse_relations(words, heads, rels)[4] == "obl:because_of"


def test_relation_with_subtype_and_no_marker_is_kept():
    words = ["his", "bike"]
    assert collapse_relations(words, [2, 0], ["nmod:poss", "root"]) == ["nmod:poss", "root"]


def test_tree_navigation():
    tree = students_tree()
    assert tree.root.text == "ride"
    assert [c.text for c in tree.children(2)] == ["Students", "bikes", "night", "."]
    assert tree[5].size == 2 and tree[5].collapsed == "obl:at"
    order = [n.index for n in tree.bottom_up()]
    assert order.index(4) < order.index(5) < order.index(2)
    assert tree.heights() == [0, 2, 0, 0, 1, 0]


def test_tree_round_trips_through_json():
    tree = students_tree()
    assert DependencyTree.from_json(tree.to_json()) == tree


def test_conllu_and_pretty_show_every_word():
    tree = students_tree()
    conllu = tree.to_conllu().splitlines()
    assert conllu[0] == "# text = Students ride bikes at night."
    assert conllu[5].split("\t")[8] == "2:obl:at"
    drawing = tree.pretty()
    assert drawing.splitlines()[0].startswith("ride  [root")
    assert all(w in drawing for w in WORDS)


def test_a_tree_needs_one_root():
    tree = students_tree()
    nodes = tuple(n if n.index != 3 else type(n)(**{**n.__dict__, "head": 0}) for n in tree.nodes)
    with pytest.raises(ValueError, match="exactly one root"):
        DependencyTree(text=tree.text, nodes=nodes)


def test_index_out_of_range_is_an_index_error():
    with pytest.raises(IndexError):
        students_tree()[7]
