"""Embedding arithmetic as the service computes it (``Arithmetic.run``)."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.arithmetic import arithmetic_query
from groundsearch.model.training.evaluation.arithmetic import top_k
from groundsearch.service.core.components import Capabilities


@pytest.mark.parametrize("rerank", [False, True])
def test_the_measured_protocol_ranks_as_the_service_does(service_components, rerank):
    """``groundsearch evaluate-arithmetic`` scores what ``/arithmetic`` answers: the same
    query and the same top k (re-ranked or not) for every start photo of the gallery."""
    ids = service_components.gallery.image_ids()
    vectors = np.stack([service_components.gallery.image_vector(i) for i in ids]).astype(np.float32)
    snow, dog = (service_components.queries.vector(w, {}) for w in ("snow", "dog"))
    # the shipped model's concept channel: the protocol leaves the photo's columns out too
    channel = service_components.model.channel_columns
    assert channel == 50
    arithmetic = Capabilities.over(service_components).arithmetic
    for start, image_id in enumerate(ids):
        hits, _, _ = arithmetic.run(image_id, ["snow"], ["dog"], 3, rerank)
        query = arithmetic_query(vectors[start], [snow], [dog], channel)
        assert [h.id for h in hits] == [ids[i] for i in top_k(query, vectors, 3, start, rerank)]
