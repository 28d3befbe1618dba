"""Constrained beam search (Anderson et al. 2017) with borrowed words (DCC): the best
sentence that contains one of a row's words; rows without constraints unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.captioning import CaptionDecoder, DecoderConfig, DecoderVocab
from groundsearch.model.runtime.captioning.beam import (
    BeamSettings,
    Constraints,
    constrained_search,
    sentence_of,
)
from groundsearch.model.runtime.captioning.entry_level import EntryLevel
from groundsearch.model.runtime.captioning.words import tokenize
from tests.model.runtime.captioning.test_captioning import (
    CAPTIONS,
    constant_decoder,
    random_decoder,
    texts,
    vectors,
)


def test_rows_without_constraints_get_the_free_search_bit_for_bit():
    decoder = random_decoder()
    x = vectors(6)
    free = decoder.generate(x, beam=3)
    assert decoder.generate(x, beam=3, constraints=Constraints([[]] * 6)) == free
    dog = decoder.vocab.index("dog")
    mixed = decoder.generate(x, beam=3, constraints=Constraints([[], [dog], [], [], [], []]))
    assert [mixed[i] for i in (0, 2, 3, 4, 5)] == [free[i] for i in (0, 2, 3, 4, 5)]


def test_every_constrained_sentence_contains_one_of_its_words():
    decoder = random_decoder(3)
    x = vectors(5)
    words = ["rock", "snow", "beach", "water", "girl"]
    rows = [[decoder.vocab.index(w)] for w in words]
    rows[4].append(decoder.vocab.index("dress"))  # one of two
    beams = decoder.generate(x, beam=3, max_len=12, constraints=Constraints(rows))
    for beam, row in zip(beams, rows, strict=True):
        assert len(beam) == 3
        wanted = {decoder.vocab.words[i] for i in row}
        assert all(wanted & set(tokenize(g.text)) for g in beam), (wanted, texts([beam]))
        assert [g.score for g in beam] == sorted((g.score for g in beam), reverse=True)


def test_the_constraint_is_met_where_it_costs_least():
    # "a dog runs" is likeliest; "cat" must appear: the best way is "a cat runs"
    decoder = constant_decoder({"a": 0.0, "dog": -0.5, "runs": -1.0, "cat": -3.0, "<eos>": -1.5})
    free = decoder.generate(np.ones((1, 4), np.float32), beam=2, max_len=4)[0][0]
    cat = decoder.vocab.index("cat")
    bound = decoder.generate(
        np.ones((1, 4), np.float32), beam=2, max_len=4, constraints=Constraints([[cat]])
    )[0][0]
    assert "cat" not in free.text.lower()
    assert "cat" in tokenize(bound.text) and bound.score < free.score


def test_a_borrowed_word_is_scored_as_its_source_and_written_as_itself():
    decoder = random_decoder(1)
    v = decoder.unit(vectors(2))
    dog = decoder.vocab.index("dog")
    size = len(decoder.vocab)
    settings = BeamSettings(beam=3)
    as_dog = constrained_search(decoder, v, settings, Constraints([[dog], [dog]]))
    as_wolf = constrained_search(
        decoder, v, settings, Constraints([[size], [size]], ("wolf",), (dog,))
    )
    for a, b in zip(as_dog, as_wolf, strict=True):
        for g, h in zip(a, b, strict=True):  # the same search, the word spelled anew
            assert h.text.lower().replace("wolf", "dog") == g.text.lower()
            assert h.score == pytest.approx(g.score)
    # a borrowed word is never written unless it is a constraint
    assert "wolf" not in str(decoder.generate(vectors(2), beam=3))


def test_articles_agree_with_a_forced_word():
    words = ["<pad>", "<unk>", "<bos>", "<eos>", "a", "dog", "elephant", "unicycle"]
    assert sentence_of(words, [4, 6], {6}) == "An elephant."
    assert sentence_of(words, [4, 7], {7}) == "A unicycle."
    assert sentence_of(words, [4, 6], set()) == "A elephant."  # only forced words


def test_bad_constraints_are_refused():
    decoder = random_decoder()
    x = vectors(2)
    with pytest.raises(ValueError, match="2 vectors"):
        decoder.generate(x, constraints=Constraints([[5]]))
    with pytest.raises(ValueError, match="words of the vocabulary"):
        decoder.generate(x, constraints=Constraints([[10_000], []]))
    with pytest.raises(ValueError, match="source"):
        Constraints([[4]], ("wolf",), ())


def novel_setup() -> tuple[CaptionDecoder, EntryLevel, torch.Tensor]:
    """A small decoder that learned "cat", the entry-level table, and an empty
    1000 × 4 classifier weight for a test to fill."""
    torch.manual_seed(0)
    decoder = CaptionDecoder(
        DecoderConfig(dim=8, embed=6, hidden=16, cond=8),
        DecoderVocab.build([*CAPTIONS, *["a cat on a rock"] * 5]),
    )
    return decoder, EntryLevel.load(), torch.zeros((1000, 4))


def test_novel_words_borrow_a_trained_noun_and_pick_confident_words():
    from groundsearch.model.runtime.captioning.novel import NovelWords
    from groundsearch.model.runtime.images.backbones import ImageNetHead

    decoder, table, weight = novel_setup()
    cat_classes = [i for i, w in enumerate(table.words) if w == "cat"]
    weight[cat_classes, 0] = 1.0  # feature 0: the domestic cats
    weight[table.classes.index("tiger"), 1] = 1.0
    novel = NovelWords(
        ImageNetHead(weight, torch.zeros(1000)), table, decoder, threshold=0.5, count=2, known=0
    )
    assert "tiger" in novel.borrowed and "cat" not in novel.borrowed
    assert decoder.vocab.words[novel.sources[novel.borrowed.index("tiger")]] in {"cat", "dog"}
    features = np.array([[12.0, 0, 0, 0], [0, 12.0, 0, 0], [0, 0, 0, 0]], np.float32)
    assert novel.confident(features) == [["cat"], ["tiger"], []]
    seen = novel.seen(features)
    assert seen[0][0].word == "cat" and seen[0][0].word_probability > 0.9
    assert seen[1][0].imagenet_class == "tiger" and seen[2] == []
    c = novel.constraints(features)
    assert c.rows[2] == [] and c.rows[1] == [len(decoder.vocab) + novel.borrowed.index("tiger")]
    beams = decoder.generate(vectors(3), beam=2, constraints=c)
    assert "tiger" in tokenize(beams[1][0].text) and "cat" in tokenize(beams[0][0].text)
    # a word among the decoder's `known` most frequent is left to it; a borrowed one never
    novel.known = len(decoder.vocab)
    assert novel.confident(features) == [[], ["tiger"], []]
    novel.known, novel.learned_threshold = 0, 1.01  # a learned word: only when nearly sure
    assert novel.confident(features) == [[], ["tiger"], []]


def test_the_tagger_speaks_for_words_the_decoder_never_learned_one_per_photo():
    """The word tagger's nouns the decoder never learned are candidates from its own
    threshold, and only its most probable one per photo (a "biker" would fit anywhere);
    the classifier's words keep their count."""
    from groundsearch.model.runtime.captioning.novel import TAGGER_COUNT, NovelWords
    from groundsearch.model.runtime.images.backbones import ImageNetHead
    from groundsearch.model.runtime.tagger import WordTagger

    decoder, table, weight = novel_setup()
    weight[table.classes.index("tiger"), 1] = 1.0
    tagger = WordTagger(
        ("sled", "biker", "dog"),
        "efficientnet-lite2",
        np.zeros(4, np.float32),
        np.ones(4, np.float32),
        np.array([[0, 0, 4, 0], [0, 0, 3, 0], [0, 0, 0, 4]], np.float32),
        np.zeros(3, np.float32),
    )
    head = ImageNetHead(weight, torch.zeros(1000))
    novel = NovelWords(
        head, table, decoder, threshold=0.5, count=3, tagger=tagger, tagger_threshold=0.6
    )
    assert {"sled", "biker"} <= set(novel.tagged) and "dog" not in novel.tagged  # learned
    assert "sled" in novel.borrowed
    features = np.array([[0, 0, 2, 0], [0, 0, 0.05, 0], [0, 12.0, 2, 0], [0, 0, 0, 5]], np.float32)
    assert TAGGER_COUNT == 1
    assert novel.confident(features) == [["sled"], [], ["sled", "tiger"], []]  # most probable first
    c = novel.constraints(features)
    beams = decoder.generate(vectors(4), beam=2, constraints=c)
    assert "sled" in tokenize(beams[0][0].text)
    free = NovelWords(
        ImageNetHead(weight, torch.zeros(1000)), table, decoder, threshold=0.5, count=3
    )
    assert free.confident(features) == [[], [], ["tiger"], []]
