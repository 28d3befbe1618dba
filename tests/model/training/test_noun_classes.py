"""Making the noun → classes table from WordNet and the entry-level words.

``wordnet/`` beside this file is a real excerpt of WordNet 3.0 (Princeton's licence in
the header of its ``data.noun``): the noun synsets of four ImageNet classes — sports car,
passenger car, canoe, tabby — and all their hypernyms, with the ``index.noun`` lines of
their lemmas (each lemma's senses in WordNet's order, most frequent first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groundsearch.model.runtime.evidence import NounClasses
from tests.bench import load_script

script = load_script("noun_classes")
MAX_SPAN, TOO_GENERAL, WordNetNouns = script.MAX_SPAN, script.TOO_GENERAL, script.WordNetNouns
main, noun_classes = script.main, script.noun_classes

EXCERPT = Path(__file__).parent / "wordnet"
#: sports car, passenger car, canoe, tabby (their ImageNet ids) and their entry words
WNIDS = ["n04285008", "n03895866", "n02951358", "n02123045", ""]
WORDS = ["car", "train", "canoe", "cat", ""]


@pytest.fixture(scope="module")
def wn() -> WordNetNouns:
    return WordNetNouns.read(EXCERPT)


def test_wordnet_is_read_with_sense_order_and_hypernyms(wn):
    assert wn.senses["car"][:2] == ("02958343", "02959942")  # automobile, then railway car
    assert wn.first_sense("car") == "02958343"
    assert "sports_car" in wn.lemmas["04285008"]
    assert wn.hypernyms["04285008"] == ("02958343",)  # sports car → car
    up = wn.ancestors("02951358")  # canoe
    assert up[0] == "04244997"  # small boat, nearest first
    assert {"02858304", "04530566", "04524313", "00001740"} <= set(up)  # boat … entity
    assert wn.first_sense("nothing") is None
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        WordNetNouns.read(EXCERPT / "missing")


def test_nouns_get_the_classes_of_their_first_sense_up_to_the_too_general(wn):
    rows = {r.noun: r for r in noun_classes(WNIDS, WORDS, wn)}
    assert rows["car"].classes == (0,)  # the sports car; the passenger car is a railway car
    assert rows["train"].classes == (1,)  # its entry-level word
    assert rows["boat"].classes == (2,)
    # first senses elsewhere: a blood vessel, the skill of handling boats
    assert "vessel" not in rows and "watercraft" not in rows
    assert rows["railcar"].classes == (1,) and rows["automobile"].classes == (0,)
    assert rows["cat"].classes == (3,) and rows["feline"].classes == (3,)
    assert rows["vehicle"].classes == (0, 1, 2)  # every path up counts
    assert rows["tabby"].how == "name 1"  # its own synset's lemma
    assert "entry 1" in rows["cat"].how and "hypernym 1" in rows["cat"].how
    # too general by the list, whatever their span; multi-word lemmas never
    for noun in ("container", "instrumentality", "artifact", "object", "animal", "organism"):
        assert noun in TOO_GENERAL and noun not in rows, noun
    assert not any("_" in n or "-" in n for n in rows)
    # too general by span: with a limit of 2 classes, "vehicle" (3) goes, "boat" stays
    narrow = {r.noun for r in noun_classes(WNIDS, WORDS, wn, max_span=2, too_general=())}
    assert "vehicle" not in narrow and "boat" in narrow and "object" not in narrow
    assert MAX_SPAN > 118  # the dog breeds stay one noun


def test_the_command_writes_a_table_the_runtime_reads(tmp_path, wn):
    entry = tmp_path / "entry_level.tsv"
    lines = ["# a comment", "index\tclass\twnid\tword\tsource\treason"]
    names = ["sports car", "passenger car", "canoe", "tabby", "web site"]
    for i, (name, wnid, word) in enumerate(zip(names, WNIDS, WORDS, strict=True)):
        lines.append(f"{i}\t{name}\t{wnid}\t{word}\tname\t")
    entry.write_text("\n".join(lines) + "\n")
    out = tmp_path / "noun_classes.tsv"
    main(["--wordnet", str(EXCERPT), "--entry-level", str(entry), "--out", str(out)])
    table = NounClasses.load(out, n_classes=5)
    assert table.classes["car"] == frozenset({0})
    assert table.classes["vehicle"] == frozenset({0, 1, 2})
    assert "web" not in table.classes
    text = out.read_text()
    assert text.startswith("# noun → the ImageNet classes")
    assert "vehicle\t0 1 2\thypernym 3\tsports car; passenger car; canoe\n" in text
