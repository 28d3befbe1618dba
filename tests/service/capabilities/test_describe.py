"""/describe's merge of the gallery's and the caption bank's captions, over stand-ins."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from groundsearch.index.gallery import CaptionRecord
from groundsearch.index.hits import Hit
from groundsearch.model.runtime.captioning import Generated
from groundsearch.model.runtime.captioning.novel import Seen
from groundsearch.service.core.capabilities.describe import Describe, Description
from groundsearch.service.core.timing import Stages


def describe(gallery_hits, bank_hits, sentences=()):
    vec, features = np.ones(4, np.float32), np.zeros(3, np.float32)
    photos = SimpleNamespace(
        vector=lambda image, timings: vec,
        features_and_vector=lambda image, timings: (features, vec),
        min_side=224,
    )
    gallery = SimpleNamespace(search_captions=lambda v, k: gallery_hits[:k])
    bank = SimpleNamespace(
        bank=None if bank_hits is None else SimpleNamespace(search=lambda v, k: bank_hits[:k])
    )
    seen = [Seen("dog", "boxer", 242, 0.4, 0.8)]
    writer = SimpleNamespace(
        decoder=object(),
        write=lambda v, timings, beam, features: list(sentences),
        concepts=lambda features: seen,
    )
    return Describe(photos, None, gallery, bank, writer, Stages())  # type: ignore[arg-type]


def caption(id: int, text: str, image_id: int, score: float) -> Hit[CaptionRecord]:
    return Hit(id, score, CaptionRecord(id, text, image_id))


def test_the_best_captions_of_both_one_text_once_the_gallery_first():
    found = describe(
        [caption(1, "a dog", 10, 0.5), caption(2, "a cat", 11, 0.3)],
        [("a dog", 0.5), ("a bird", 0.4), ("a cat", 0.9)],
    )
    hits, written, seen, timings = found.run(None, k=3)  # type: ignore[arg-type]
    assert hits == [
        Description("a cat", 0.9, "bank"),
        Description("a dog", 0.5, "gallery", 1, 10),
        Description("a bird", 0.4, "bank"),
    ]
    assert written == [] and "search" in timings
    assert [c.word for c in seen] == ["dog"]  # what the classifier saw, even unwritten


def test_without_a_bank_the_gallery_answers_and_written_sentences_come_first():
    wrote = [Generated("a dog runs", 0.7)]
    found = describe([caption(1, "a dog", 10, 0.5)], None, wrote)
    hits, written, _, _ = found.run(None, k=5, retrieved=True, written=True)  # type: ignore[arg-type]
    assert [h.source for h in hits] == ["gallery"] and written == wrote
    hits, written, _, _ = found.run(None, k=5, retrieved=False, written=True)  # type: ignore[arg-type]
    assert hits == [] and written == wrote
