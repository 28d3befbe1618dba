"""The service's ``Judge`` with the shipped relevance model: without evidence it judges as
the model does without evidence models; with each hit's top classes it passes the
evidence on, and its default threshold is the one chosen for evidence."""

from __future__ import annotations

import numpy as np

from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.evidence import NounClasses
from groundsearch.model.runtime.relevance import load_relevance
from groundsearch.service.relevance import NO_JUDGE, Judge
from groundsearch.settings import get_settings


def _shipped():
    s = get_settings()
    return load_relevance(s.model_dir / "relevance.json", checkpoint_identity(s.default_checkpoint))


def test_without_evidence_the_judge_is_unchanged():
    model = _shipped()
    judge = Judge(model)
    scores = list(np.linspace(0.6, 0.1, 20))
    plain = model.without_evidence().predict("text-image", scores, 0.0, 2)
    assert judge.of("text-image", scores, text="a dog") == [float(x) for x in plain]
    assert judge.threshold(None) == model.threshold
    assert judge.threshold(0.4) == judge.threshold(0.4, evidence=True) == 0.4
    assert NO_JUDGE.of("text-image", scores) == [None] * 20
    ids, probs = np.zeros((20, 10), int), np.zeros((20, 10))
    assert NO_JUDGE.evidence("text-image", ["dog"], ids, probs) is None
    assert NO_JUDGE.threshold(None, evidence=True) is None


def test_with_the_hits_top_classes_the_judge_reads_evidence():
    model = _shipped()
    judge = Judge(model)
    dog = sorted(NounClasses.load().classes["dog"])
    ids = np.full((20, 10), -1)
    probs = np.zeros((20, 10))
    ids[::2, 0], probs[::2, 0] = dog[0], 0.9  # every other hit: the classifier sees a dog
    evidence = judge.evidence("text-image", ["dog"], ids, probs)
    assert evidence is not None
    np.testing.assert_allclose(evidence, np.tile([0.9, 0.0], 10))
    assert judge.evidence("text-image", ["man"], ids, probs) is None  # no nameable noun
    assert judge.evidence("image-image", ["dog"], ids, probs) is None  # no evidence model
    assert judge.evidence("text-image", ["dog"], None, None) is None  # classes unknown
    scores = list(np.linspace(0.6, 0.4, 20))
    p = judge.of("text-image", scores, text="a dog", evidence=evidence)
    assert all(a > b for a, b in zip(p[::2], p[1::2], strict=True))  # seen above unseen
    assert judge.threshold(None, evidence=True) == model.evidence_threshold
