"""bench/big_gallery.py: a real gallery grown by near-copies that a server can open."""

from __future__ import annotations

import numpy as np

from groundsearch.index.gallery import Gallery
from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records
from tests.bench import load_script


def test_the_copies_keep_their_bases_norm_and_classes_and_the_gallery_opens(
    service_gallery, tmp_path
):
    script = load_script("big_gallery")
    out = tmp_path / "big"
    made = script.build(service_gallery, out, 40, seed=0)
    assert made["photos"] == 40 and made["real"] == 8 and made["noise_tau"] > 0.05
    store = Records.open(out / DB_FILE)
    ids, vectors = script.base_photos(store.reader())
    classes = records.classes_of(store.reader(), ids)
    assert len(ids) == 40 and set(classes) == set(ids)  # every copy has its base's classes
    base, copies = vectors[:8], vectors[8:]
    np.testing.assert_allclose(
        np.linalg.norm(copies, axis=1), np.linalg.norm(base[np.arange(32) % 8], axis=1), rtol=1e-5
    )
    assert not np.allclose(copies, base[np.arange(32) % 8])  # near-copies, not copies
    np.testing.assert_array_equal(classes[ids[8]][0], classes[ids[0]][0])
    meta = store.meta
    store.close()
    gallery = Gallery.open(out, meta["identity"])  # the index built from the records
    assert gallery.counts()["images"] == 40
    gallery.close()
