"""The caption decoder's runtime: beam search, its penalties, re-ranking, the artifact."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.captioning import (
    CaptionDecoder,
    DecoderConfig,
    DecoderError,
    DecoderVocab,
    Generated,
    load_decoder,
    rerank,
    save_decoder,
    sentence,
    tokenize,
)

CAPTIONS = [
    "A black dog runs on the beach .",
    "Two dogs play in the snow .",
    "A man in a red shirt climbs a rock .",
    "A girl in a pink dress jumps into the water .",
] * 5


def random_decoder(seed: int = 0) -> CaptionDecoder:
    torch.manual_seed(seed)
    return CaptionDecoder(
        DecoderConfig(dim=8, embed=6, hidden=16, cond=8), DecoderVocab.build(CAPTIONS)
    )


def constant_decoder(logits: dict[str, float]) -> CaptionDecoder:
    """A decoder whose next-word scores never change: ``logits`` by word, -20 elsewhere."""
    words = ["<pad>", "<unk>", "<bos>", "<eos>", *[w for w in logits if w != "<eos>"]]
    decoder = CaptionDecoder(
        DecoderConfig(dim=4, embed=2, hidden=4, cond=2), DecoderVocab(tuple(words))
    )
    with torch.no_grad():
        decoder.out.weight.zero_()
        decoder.out.bias.copy_(torch.tensor([logits.get(w, -20.0) for w in words]))
    return decoder


def vectors(n: int, dim: int = 8) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(n, dim)).astype(np.float32)


def texts(beams: list[list[Generated]]) -> list[list[str]]:
    return [[g.text for g in b] for b in beams]


def test_words_are_lower_case_without_punctuation_and_written_back_as_a_sentence():
    assert tokenize("A dog's ball , on the T-shirt.") == [
        "a",
        "dog's",
        "ball",
        "on",
        "the",
        "t-shirt",
    ]
    assert sentence(["two", "dogs", "play"]) == "Two dogs play."
    vocab = DecoderVocab.build(CAPTIONS, min_count=5)
    assert vocab.words[:4] == ("<pad>", "<unk>", "<bos>", "<eos>")
    assert vocab.decode(vocab.encode("A black dog runs !")) == "A black dog runs."
    assert vocab.encode("a zebra")[2] == vocab.unk


def test_beam_search_gives_beam_distinct_sentences_best_first_and_the_same_each_time():
    decoder = random_decoder()
    x = vectors(5)
    first = decoder.generate(x, beam=4)
    assert first == decoder.generate(x, beam=4)
    assert texts(decoder.generate(x * 3.0, beam=4)) == texts(first)  # normalised first
    for beam in first:
        assert len(beam) == 4 and len({g.text for g in beam}) == 4
        assert [g.score for g in beam] == sorted((g.score for g in beam), reverse=True)
        for g in beam:
            assert g.text[0].isupper() and g.text.endswith(".")
            assert len(g.text[:-1].split()) <= 20
    # one row at a time gives the same as the batch
    assert texts([decoder.generate(x[i : i + 1], beam=4)[0] for i in range(5)]) == texts(first)
    # greedy is beam 1
    assert all(len(b) == 1 for b in decoder.generate(x, beam=1))


def test_generate_refuses_train_mode_and_wrong_shapes():
    decoder = random_decoder()
    with pytest.raises(ValueError, match="n × 8"):
        decoder.generate(np.zeros((2, 5), np.float32))
    decoder.train()
    with pytest.raises(RuntimeError, match="eval"):
        decoder.generate(vectors(1))


def test_the_repetition_penalty_removes_a_repeated_content_word():
    decoder = constant_decoder({"dog": 5.0, "runs": 4.0, "<eos>": 2.0})
    x = vectors(1, dim=4)
    free = decoder.generate(x, beam=1, max_len=6, repeat_penalty=0.0)[0][0]
    assert free.text == "Dog dog dog dog dog dog."
    assert decoder.generate(x, beam=1, max_len=6)[0][0].text == "Dog runs."
    # a finite penalty lowers the repeat's score instead of forbidding it
    assert decoder.generate(x, beam=1, max_len=6, repeat_penalty=0.5)[0][0].text == free.text


def test_a_repeated_trigram_of_function_words_is_forbidden_but_a_bigram_is_not():
    decoder = constant_decoder({"in": 5.0, "a": 4.5, "on": 4.0, "<eos>": -1.0})
    x = vectors(1, dim=4)
    assert decoder.generate(x, beam=1, max_len=8, no_repeat_ngram=0)[0][0].text == (
        "In in in in in in in in."
    )
    words = decoder.generate(x, beam=1, max_len=8)[0][0].text[:-1].lower().split()
    assert words == ["in", "in", "in", "a", "in", "in", "on", "in"]
    trigrams = list(zip(words, words[1:], words[2:], strict=False))
    assert len(trigrams) == len(set(trigrams))


def test_length_normalisation_favours_longer_sentences_than_the_raw_sum():
    decoder = constant_decoder({"dog": 5.0, "runs": 5.0, "fast": 5.0, "<eos>": 3.0})
    x = vectors(1, dim=4)
    raw = decoder.generate(x, beam=3, length_penalty=0.0)[0][0]
    mean = decoder.generate(x, beam=3, length_penalty=1.0)[0][0]
    assert len(raw.text.split()) == 1
    assert len(mean.text.split()) == 3
    probs = torch.softmax(decoder.out.bias.detach(), 0)
    word, eos = math.log(probs[4]), math.log(probs[3])
    assert mean.score == pytest.approx((3 * word + eos) / 4, abs=1e-5)


def test_rerank_orders_by_the_joint_score_of_each_sentence():
    beams = [[Generated("A dog runs.", -1.0), Generated("A cat sleeps.", -2.0)]]
    photo = np.array([[0.0, 1.0]], np.float32)

    def embed(texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] if "dog" in t else [0.0, 2.0] for t in texts], np.float32)

    best = rerank(photo, beams, embed)[0]
    assert [g.text for g in best] == ["A cat sleeps.", "A dog runs."]
    assert best[0].score == pytest.approx(1.0)
    # weighting the decoder's own score enough restores its order
    assert rerank(photo, beams, embed, lm_weight=2.0)[0][0].text == "A dog runs."


def test_the_artifact_round_trips_and_is_refused_for_another_joint_model(tmp_path):
    decoder = random_decoder()
    path = tmp_path / "decoder.pt"
    save_decoder(decoder, path, {"checkpoint_sha256": "abc"}, extra={"command": "groundsearch x"})
    loaded = load_decoder(path, identity={"checkpoint_sha256": "abc"}, dim=8)
    assert loaded.extra["command"] == "groundsearch x" and not loaded.training
    with torch.no_grad():  # float16 weights: the original rounded the same way
        for p in decoder.parameters():
            p.copy_(p.half().float())
    x = vectors(3)
    assert loaded.generate(x) == decoder.generate(x)
    with pytest.raises(DecoderError, match="trained on the joint model"):
        load_decoder(path, identity={"checkpoint_sha256": "def"})
    with pytest.raises(DecoderError, match="8-d vectors"):
        load_decoder(path, dim=640)
    with pytest.raises(DecoderError, match="not found"):
        load_decoder(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(DecoderError, match="not a caption decoder"):
        load_decoder(tmp_path / "junk.pt")
    # re-stamped for a checkpoint whose channel settings changed: the same sentences
    from groundsearch.model.runtime.captioning.artifact import restamp_decoder

    restamp_decoder(path, {"checkpoint_sha256": "def"})
    assert load_decoder(path, identity={"checkpoint_sha256": "def"}).generate(x) == loaded.generate(
        x
    )
    with pytest.raises(DecoderError, match="trained on the joint model"):
        load_decoder(path, identity={"checkpoint_sha256": "abc"})
