"""The evaluation protocol on a few real Flickr8k photos, checked against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from groundsearch.model.data import DatasetError, load_captioned_images
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.joint import JointConfig, JointModel
from groundsearch.model.runtime.text.glove import glove_vocabulary
from groundsearch.model.training.corpus import build_split
from groundsearch.model.training.evaluation.protocol import (
    caption_groups,
    expert_correlation,
    has_verb,
    pair_correlation,
    sentence_benchmarks,
    split_metrics,
)
from groundsearch.model.training.evaluation.similarity import read_sts
from groundsearch.model.training.kcca import KCCAConfig, fit_kcca
from tests.tiny_data import DATA, make_tiny_flickr


@pytest.fixture(scope="module")
def splits(tiny_flickr, parser, extractor):
    return {
        name: build_split(load_captioned_images(tiny_flickr, split=name), parser, extractor)
        for name in ("train", "dev", "test")
    }


@pytest.fixture(scope="module")
def model(splits, parser, extractor):
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    cfg = KCCAConfig(n_landmarks=30, dims=(4, 8), regs=(0.1, 1.0), seed=0)
    fitted, _, _ = fit_kcca(tr, splits["dev"], vocab, parser.version, extractor.identity, cfg)
    return fitted


def _avg_ranks(x: list[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span (by counting)."""
    return [1 + sum(y < v for y in x) + (sum(y == v for y in x) - 1) / 2 for v in x]


def _pearson(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))


def _cos(u: np.ndarray, w: np.ndarray) -> float:
    u, w = np.asarray(u, np.float64), np.asarray(w, np.float64)
    return float(sum(p * q for p, q in zip(u, w, strict=True)) / math.sqrt((u @ u) * (w @ w)))


def test_expert_spearman_matches_brute_force(tmp_path, model, parser, extractor):
    root = make_tiny_flickr(tmp_path / "flickr8k", train=0, dev=0, test=4, expert=True)
    lines = [ln.split("\t") for ln in (root / "ExpertAnnotations.txt").read_text().splitlines()]
    # One judgment of a photo that is not in the folder: left out and counted.
    with (root / "ExpertAnnotations.txt").open("a") as f:
        f.write(f"1000268201_693b08cb0e.jpg\t{lines[0][1]}\t4\t4\t4\n")
    got = expert_correlation(model, root, parser.parse, extractor.embed_files)
    token_lines = (root / "Flickr8k.token.txt").read_text().splitlines()
    captions = dict(ln.split("\t", 1) for ln in token_lines)
    cosines, gold = [], []
    for image, cid, *scores in lines:
        v = model.embed_images(extractor.embed_files([root / "Images" / image]))[0]
        y = model.embed_sentences(parser.parse([captions[cid]]))[0]
        cosines.append(_cos(v, y))
        gold.append(sum(float(s) for s in scores) / 3)
    assert len(set(gold)) < len(gold)  # the expert means tie: the tie rule matters
    reference = 100 * _pearson(_avg_ranks(cosines), _avg_ranks(gold))
    assert got["pairs"] == len(lines) and got["pairs_skipped"] == 1
    assert got["spearman"] == pytest.approx(reference, abs=1e-6)


def test_missing_files_are_reported_as_skipped(tmp_path, model, parser, extractor):
    root = make_tiny_flickr(tmp_path / "flickr8k", train=0, dev=0, test=3)
    assert (
        "no ExpertAnnotations.txt"
        in expert_correlation(model, root, parser.parse, extractor.embed_files)["skipped"]
    )
    out = sentence_benchmarks(model, parser.parse, tmp_path)
    assert "sts-test.csv not found" in out["sts_b"]["skipped"]
    assert "SICK.txt not found" in out["sick_r"]["skipped"]


def test_expert_pairs_without_photo_or_caption_are_skipped(tmp_path, model, parser, extractor):
    root = make_tiny_flickr(tmp_path / "flickr8k", train=0, dev=0, test=2)
    (root / "ExpertAnnotations.txt").write_text("nothere.jpg\tnothere.jpg#0\t1\t2\t3\n")
    got = expert_correlation(model, root, parser.parse, extractor.embed_files)
    assert "0 of the 1 judgments" in got["skipped"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a.jpg\tb.jpg#0\t1\t2\n", r"ExpertAnnotations.txt:1: expected '<image><TAB>"),
        ("a.jpg\tb.jpg#0\t1\t2\t3\na.jpg\tb.jpg#1\t1\t9\t3\n", r":2: expected a score in 1–4"),
        ("a.jpg\tb.jpg#0\t1\tx\t3\n", r":1: expected a score in 1–4, got 'x'"),
        ("\n\n", "holds no judgments"),
    ],
)
def test_malformed_expert_file_is_a_clear_error(
    tmp_path, model, parser, extractor, content, message
):
    root = make_tiny_flickr(tmp_path / "flickr8k", train=0, dev=0, test=1)
    (root / "ExpertAnnotations.txt").write_text(content)
    with pytest.raises(DatasetError, match=message):
        expert_correlation(model, root, parser.parse, extractor.embed_files)


def test_sts_pairs_correlate_cosine_with_gold(parser, extractor):
    a, b, gold = read_sts(DATA / "stsbenchmark" / "sts-test.csv")
    a, b, gold = a[:12], b[:12], gold[:12]
    ta, tb = parser.parse(a), parser.parse(b)
    # A seeded bag-of-words joint model: GloVe means under a near-identity map.
    vocab = glove_vocabulary(t.words for t in ta + tb)
    joint = JointModel(JointConfig(encoder="bow"), vocab, None, parser.version, extractor.identity)
    model = JointEmbedder(joint, normalize=True)
    got = pair_correlation(model, parser.parse, a, b, gold)
    ya, yb = model.embed_sentences(ta), model.embed_sentences(tb)
    cos = [_cos(u, w) for u, w in zip(ya, yb, strict=True)]
    # Pairs 10 and 11 are the same pair (an exact tie); no near-ties for noise to break.
    assert len(set(np.round(cos, 6))) == len(set(cos)) == len(cos) - 1
    assert got["pairs"] == 12
    assert got["pearson"] == pytest.approx(100 * _pearson(cos, list(gold)), abs=1e-6)
    assert got["spearman"] == pytest.approx(
        100 * _pearson(_avg_ranks(cos), _avg_ranks(list(gold))), abs=1e-6
    )
    with pytest.raises(ValueError, match="2\\+ scored sentence pairs"):
        pair_correlation(model, parser.parse, a[:1], b[:1], gold[:1])
    with pytest.raises(ValueError, match="2\\+ scored sentence pairs"):
        pair_correlation(model, parser.parse, a, b[:3], gold)


def test_split_metrics_add_sentence_similarity(splits, model):
    sp = splits["test"]
    m = split_metrics(model, sp.trees, sp.features, sp.caption_image)
    assert 1 <= m["sentence_similarity_mean_rank"] <= len(sp.trees) - 4
    assert m["i2t"]["mean_rank"] >= 1 and 0 <= m["rsum"] <= 600
    # An image with a single caption cannot take part: reported, not crashed.
    one = split_metrics(model, sp.trees[:6], sp.features[:2], sp.caption_image[:6])
    assert "another caption of the same image" in one["sentence_similarity_mean_rank"]["skipped"]


def test_split_metrics_add_intervals_and_verb_groups(splits, model):
    sp = splits["test"]
    m = split_metrics(model, sp.trees, sp.features, sp.caption_image, resamples=50)
    low, high = m["ci95"]["rsum"]
    assert low <= m["rsum"] <= high and m["ci95"]["resamples"] == 50
    groups = m["t2i_groups"]
    assert groups["with_verb"]["captions"] + groups["without_verb"]["captions"] == len(sp.trees)
    verbs = sum(has_verb(t) for t in sp.trees)
    assert groups["with_verb"]["captions"] == verbs


def test_a_verb_is_a_verb_not_a_copula(parser):
    with_verb, copula, phrase = parser.parse(
        ["A dog runs on the beach .", "A dog is in the snow .", "Two children on a slide ."]
    )
    assert has_verb(with_verb) and not has_verb(copula) and not has_verb(phrase)
    masks = caption_groups([with_verb, copula, phrase])
    assert masks["with_verb"].tolist() == [True, False, False]
    assert masks["without_verb"].tolist() == [False, True, True]


def test_empty_split_is_a_clear_error(tiny_flickr, tmp_path):
    (tmp_path / "none.txt").write_text("")
    with pytest.raises(DatasetError, match="no image with captions found"):
        load_captioned_images(tiny_flickr, split=tmp_path / "none.txt")


def test_split_metrics_rank_image_search_as_the_service_with_a_hubness(splits, model):
    from groundsearch.model.runtime.hubness import Hubness, Penalty
    from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

    sp = splits["test"]
    plain = split_metrics(model, sp.trees, sp.features, sp.caption_image, resamples=20)
    y = model.embed_sentences(sp.trees)
    v = model.embed_images(sp.features)
    only = Hubness(Penalty(np.asarray(y, np.float32), 2, 1.0), None, {})
    fixed = split_metrics(model, sp.trees, sp.features, sp.caption_image, 20, only)
    assert fixed["i2t"] == plain["i2t"]  # no captions' side: description keeps raw scores
    search = v @ y.T - only.photo_penalties(v)[:, None]
    assert fixed["t2i"] == retrieval_metrics(v @ y.T, sp.caption_image, search)["t2i"]
    both = Hubness(only.photos, Penalty(np.asarray(v, np.float32), 2, 1.0), {})
    fixed = split_metrics(model, sp.trees, sp.features, sp.caption_image, 20, both)
    describe = v @ y.T - both.caption_penalties(y)[None, :]
    assert fixed["i2t"] == retrieval_metrics(describe, sp.caption_image)["i2t"]
    assert fixed["t2i"] == retrieval_metrics(v @ y.T, sp.caption_image, search)["t2i"]
