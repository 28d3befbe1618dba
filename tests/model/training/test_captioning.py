"""Training the caption decoder: on real Flickr8k captions the loss falls; a decoder goes
on training from another, new words added; sentence conditioning never uses the target's
own vector; a collection's share; scores of generated captions."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import DecoderConfig
from groundsearch.model.runtime.text.glove import load_glove
from groundsearch.model.training.captioning import (
    CaptionSet,
    DecoderTrainConfig,
    conditions,
    dev_loss,
    extended,
    siblings_of,
    train_decoder,
)
from groundsearch.model.training.evaluation.captions import (
    collection_ciders,
    copy_share,
    generated_retrieval,
)

DIM = 16


def caption_set(split: str, photos: int, seed: int) -> CaptionSet:
    """The first photos of a Flickr8k split with their real captions; each photo a random
    unit vector, each caption its photo's vector plus noise."""
    ds = load_captioned_images(get_settings().flickr8k_dir, split=split)
    keep = [j for j, i in enumerate(ds.caption_image) if i < photos]
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(photos, DIM)).astype(np.float32)
    photo = np.array([ds.caption_image[j] for j in keep])
    cv = v[photo] + 0.1 * rng.normal(size=(len(keep), DIM)).astype(np.float32)
    return CaptionSet(v, tuple(ds.captions[j] for j in keep), photo, cv)


@pytest.fixture(scope="module")
def data() -> tuple[CaptionSet, CaptionSet]:
    return caption_set("train", 12, 0), caption_set("dev", 4, 1)


def test_a_tiny_run_on_real_captions_lowers_the_loss_and_starts_from_glove(data):
    train, dev = data
    config = DecoderTrainConfig(
        epochs=4, batch_size=8, lr=5e-3, min_count=2, patience=4, sentence_share=0.0
    )
    arch = DecoderConfig(hidden=32, cond=16, dropout=0.0)
    decoder, summary = train_decoder(train, dev, config, arch, log=lambda _: None)
    losses = [h["train_loss"] for h in summary["history"]]
    assert losses[-1] < losses[0] - 0.5
    assert summary["dev_loss"] == min(h["dev_loss"] for h in summary["history"])
    assert decoder.config.dim == DIM and not decoder.training
    assert "dog" in decoder.vocab.words and "<unk>" in decoder.vocab.words
    words, vectors = load_glove()
    # the embedding started at GloVe's and moved a little (lr × steps)
    dog = decoder.embed.weight[decoder.vocab.index("dog")].detach().numpy()
    assert np.linalg.norm(dog - vectors[words.index("dog")]) < 1.0
    # it writes sentences from its own words for a training photo's vector
    text = decoder.generate(train.photo_vectors[:1], beam=3)[0][0].text
    assert text.endswith(".") and len(text.split()) >= 2


def test_a_judge_picks_the_epoch_kept_and_the_loss_still_steers_the_schedule(data):
    train, dev = data
    config = DecoderTrainConfig(
        epochs=4, batch_size=8, lr=5e-3, min_count=2, patience=4, sentence_share=0.0
    )
    arch = DecoderConfig(hidden=32, cond=16, dropout=0.0)
    # two collections; their mean prefers epoch 2, the loss a later one
    marks = iter([[1.0, 1.0], [2.0, 4.0], [2.5, 1.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match="needs a judge exactly when"):
        train_decoder(train, dev, replace(config, select="cider"), arch, log=lambda _: None)
    decoder, summary = train_decoder(
        train, dev, replace(config, select="cider"), arch, log=lambda _: None,
        judge=lambda _: next(marks),
    )  # fmt: skip
    history = summary["history"]
    assert [h["judged"] for h in history] == [1.0, 3.0, 2.0, 0.5]
    assert history[1]["judged_each"] == [2.0, 4.0]
    assert summary["best_epoch"] == 2 and summary["judged"] == 3.0
    assert summary["dev_loss"] == history[1]["dev_loss"] > min(h["dev_loss"] for h in history)
    _, unjudged = train_decoder(train, dev, config, arch, log=lambda _: None)
    lowest = min(history, key=lambda h: h["dev_loss"])["epoch"]  # the same run, unjudged
    assert unjudged["judged"] is None and unjudged["best_epoch"] == lowest != 2
    # the kept weights are epoch 2's: its dev loss again
    assert dev_loss(decoder, dev, config.max_words) == pytest.approx(history[1]["dev_loss"])
    with pytest.raises(ValueError, match="select must be one of loss, cider"):
        DecoderTrainConfig(select="bleu")


def test_a_decoder_goes_on_from_another_with_the_new_words_added_and_is_kept_when_no_better(
    data,
):
    train, dev = data
    config = DecoderTrainConfig(
        epochs=2, batch_size=8, lr=5e-3, min_count=2, patience=4, sentence_share=0.0
    )
    arch = DecoderConfig(hidden=32, cond=16, dropout=0.0)
    first, _ = train_decoder(train, dev, config, arch, log=lambda _: None)
    # a collection of its own words: "kite" is new, "dog" known
    kites = replace(train, caption_texts=tuple(f"{t} kite kite" for t in train.caption_texts))
    grown = extended(first, ["dog", "kite", "kite"])
    n = len(first.vocab)
    assert grown.vocab.words == (*first.vocab.words, "kite") and grown is not first
    old, new = first.state_dict(), grown.state_dict()
    assert all(torch.equal(old[k], new[k]) for k in old if k not in EXTENDED)
    assert all(torch.equal(old[k], new[k][:n]) for k in EXTENDED)
    assert float(new["out.weight"][n].abs().sum()) == 0.0
    assert float(new["out.bias"][n]) == float(old["out.bias"][first.vocab.unk])
    # epoch 0 is the decoder as it was, and the judge keeps it when no epoch beats it
    marks = iter([[3.0], [2.0], [1.0]])
    tuned, summary = train_decoder(
        kites, dev, replace(config, select="cider"), arch, log=lambda _: None,
        judge=lambda _: next(marks), init=first,
    )  # fmt: skip
    assert [h["epoch"] for h in summary["history"]] == [0, 1, 2]
    assert summary["best_epoch"] == 0 and summary["init_words"] == n
    assert tuned.vocab.words[-1] == "kite" and not tuned.training
    assert dev_loss(tuned, dev, 24) == pytest.approx(dev_loss(grown, dev, 24))  # as it was
    # judged better, a later epoch is kept, and it has learnt the new word
    marks = iter([[1.0], [2.0], [3.0]])
    tuned, summary = train_decoder(
        kites, dev, replace(config, select="cider"), arch, log=lambda _: None,
        judge=lambda _: next(marks), init=first,
    )  # fmt: skip
    assert summary["best_epoch"] == 2
    assert "kite" in tuned.generate(kites.photo_vectors[:1], beam=3)[0][0].text


EXTENDED = ("embed.weight", "out.weight", "out.bias")


def test_each_collection_is_judged_on_its_own_references(data):
    train, dev = data
    config = DecoderTrainConfig(epochs=2, batch_size=8, lr=5e-3, min_count=2, sentence_share=0)
    decoder, _ = train_decoder(train, dev, config, DecoderConfig(hidden=32, cond=16), log=print)
    refs = [[t for t, p in zip(dev.caption_texts, dev.caption_photo, strict=True) if p == i]
            for i in range(len(dev.photo_vectors))]  # fmt: skip
    own = [b[0].text for b in decoder.generate(dev.photo_vectors, beam=3)]
    [one] = collection_ciders(decoder, [(dev.photo_vectors, refs)])
    [perfect] = collection_ciders(decoder, [(dev.photo_vectors, [[s] * 2 for s in own])])
    assert 0 <= one < perfect
    # two collections: each scored against its own references only
    both = collection_ciders(
        decoder, [(dev.photo_vectors, refs), (dev.photo_vectors[:2], refs[:2])]
    )
    [part] = collection_ciders(decoder, [(dev.photo_vectors[:2], refs[:2])])
    assert both == pytest.approx([one, part])


def test_sentence_conditioning_uses_a_sibling_caption_never_its_own(data):
    train, _ = data
    rng = np.random.default_rng(0)
    rows = np.arange(len(train.caption_texts))
    siblings = siblings_of(train)
    always = conditions(train, rows, 1.0, rng, siblings)
    never = conditions(train, rows, 0.0, rng, siblings)
    np.testing.assert_array_equal(never, train.photo_vectors[train.caption_photo])
    for j, vector in zip(rows, always, strict=True):
        match = np.flatnonzero((train.caption_vectors == vector).all(axis=1))
        assert len(match) == 1 and match[0] != j
        assert train.caption_photo[match[0]] == train.caption_photo[j]


def test_a_share_of_a_collection_and_sets_joined_in_order(data):
    from groundsearch.model.training.caption_data import share_of

    ds = load_captioned_images(get_settings().flickr8k_dir, split="dev")
    assert share_of(ds, 1.0) is ds and share_of(ds, 2.0) is ds
    part = share_of(ds, 0.3)
    assert len(part.images) == round(0.3 * len(ds.images)) and set(part.images) < set(ds.images)
    assert share_of(ds, 0.3).images == part.images  # seeded
    assert all(part.captions_of(i) == ds.captions_of(ds.images.index(p))
               for i, p in enumerate(part.images[:5]))  # fmt: skip
    train, dev = data
    both = CaptionSet.joined([train, dev])
    assert len(both.photo_vectors) == len(train.photo_vectors) + len(dev.photo_vectors)
    np.testing.assert_array_equal(
        both.caption_photo[len(train.caption_texts) :], dev.caption_photo + len(train.photo_vectors)
    )
    assert both.caption_texts == train.caption_texts + dev.caption_texts


def test_copies_and_retrieval_of_generated_sentences():
    training = ["A dog runs on the beach .", "Two cats sleep ."]
    assert copy_share(["A dog runs on the beach.", "A dog runs."], training) == 50.0
    photos = np.eye(3, dtype=np.float32)
    sentences = np.array([[1, 0, 0], [1, 0.1, 0], [0, 0, 1]], np.float32)
    found = generated_retrieval(photos, sentences)
    assert found["R@1"] == pytest.approx(200 / 3) and found["median_rank"] == 1.0


@pytest.mark.slow  # the PTB tokenizer and METEOR run Java in subprocesses
@pytest.mark.skipif(shutil.which("java") is None, reason="pycocoevalcap needs Java")
def test_caption_scores_are_perfect_for_a_reference_and_lower_for_a_worse_sentence():
    from groundsearch.model.training.evaluation.captions import caption_scores

    refs = {
        "1": ["A black dog runs on the beach .", "A dog running in the sand ."],
        "2": ["Two girls sit on a bench .", "Two young women sitting on a park bench ."],
    }
    same = caption_scores(
        refs, {"1": "A black dog runs on the beach.", "2": "Two girls sit on a bench."}
    )
    worse = caption_scores(refs, {"1": "A man rides a bike.", "2": "Two girls sit."})
    assert same["BLEU-4"] == pytest.approx(100.0, abs=1e-3) and same["notes"] == []
    for metric in ("BLEU-1", "BLEU-4", "METEOR", "CIDEr-D", "ROUGE-L"):
        assert worse[metric] < same[metric]
