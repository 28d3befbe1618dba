"""bench/hubness.py: the penalty, the hub it demotes, the candidate depth, the ensemble's
joined space and the setting chosen on the dev splits."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from tests.bench import load_script


@pytest.fixture(scope="module")
def hub() -> ModuleType:
    return load_script("hubness")


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def hubbed_split(rng: np.random.Generator, n: int = 40, d: int = 16) -> dict[str, np.ndarray]:
    """``n`` photos with a caption each: the photo, a direction every caption shares and
    noise; photo 0 is that shared direction (a hub: it outscores many a caption's own
    photo)."""
    shared = unit(rng.normal(size=d))
    v = unit(rng.normal(size=(n, d)))
    y = unit(v + 0.9 * shared + 0.5 * rng.normal(size=(n, d)) / np.sqrt(d))
    v[0] = shared
    return {"y": y, "v": v, "ci": np.arange(n)}


def test_a_hub_photo_is_demoted_and_its_captions_find_their_own_photos(hub):
    rng = np.random.default_rng(1)
    split = hubbed_split(rng)
    bank = unit(split["y"] + 0.3 * rng.normal(size=split["y"].shape) / 4)  # like the captions
    raw = split["v"] @ split["y"].T
    t2i = raw - hub.bank_means(split["v"], bank, 5)[:, None]
    won_raw = int((raw.argmax(axis=0) == 0).sum())
    won = int((t2i.argmax(axis=0) == 0).sum())
    assert won_raw > 3 and won < won_raw  # the hub comes first for fewer captions
    ci = split["ci"]
    # image search finds more own photos; each photo's caption order stays
    assert hub.recall_sum(t2i, ci, "t2i") > hub.recall_sum(raw, ci, "t2i")
    assert hub.recall_sum(t2i, ci, "i2t") == hub.recall_sum(raw, ci, "i2t")


def test_the_whole_depth_is_the_full_correction_and_depth_one_the_raw_order(hub):
    rng = np.random.default_rng(2)
    raw = rng.normal(size=(6, 9))
    fixed = raw - rng.uniform(size=(6, 1))
    full = hub.within_depth(raw, fixed, 6, axis=1)  # queries: captions (columns)
    assert np.array_equal(full.argsort(axis=0), fixed.argsort(axis=0))
    first = hub.within_depth(raw, fixed, 1, axis=1)
    assert np.array_equal(first.argmax(axis=0), raw.argmax(axis=0))


def test_the_joined_space_scores_the_members_mean(hub):
    rng = np.random.default_rng(3)
    members = [
        {"a-b": {"y": rng.normal(size=(4, 3)), "v": rng.normal(size=(2, 3)), "ci": np.zeros(4)}}
        for _ in range(3)
    ]
    space = hub.joined(members)["a-b"]
    mean = sum(m["a-b"]["v"] @ m["a-b"]["y"].T for m in members) / 3
    assert np.allclose(space["v"] @ space["y"].T, mean)


def test_the_setting_is_chosen_on_the_dev_splits_and_beats_the_raw_scores_there(hub):
    rng = np.random.default_rng(4)
    splits = ("flickr8k-train", "cc-web-train", "flickr8k-dev", "cc-web-dev", "flickr8k-test")
    space = {name: hubbed_split(rng, n=60) for name in splits}
    result = hub.measure(space, bank=80)
    assert result["bank"] == {"captions": 80, "photos": 80}
    assert result["mixed_dev"]["corrected"] >= result["mixed_dev"]["raw"]
    assert result["chosen"]["photos"]["weight"] > 0.0  # a hub on every split: corrected
    assert set(result["grid"]) == {"photos", "captions"}
    for kind in ("raw", "corrected"):  # the mixed dev: the mean of the two dev rsums
        dev = result[f"rsum_{kind}"]
        mean = (dev["flickr8k-dev"] + dev["cc-web-dev"]) / 2
        assert result["mixed_dev"][kind] == pytest.approx(mean, abs=0.11)
    assert set(result["rsum_corrected_within_depth"]["flickr8k-test"]) == set(map(str, hub.DEPTHS))
