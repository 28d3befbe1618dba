"""bench/arithmetic_examples.py: the markdown tables and the example picture."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image

from tests.bench import load_script
from tests.tiny_data import FLICKR

PHOTOS = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[:17]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("arithmetic_examples")


def result(encoder: str, share: float) -> dict:
    scores = {"share_b": share, "share_a": 5.0, "likeness": 40.0}
    example = {"start": PHOTOS[0], "has_b": {}}
    for i, q in enumerate(("arithmetic", "text", "photo", "plus_only")):
        example[q] = PHOTOS[1 + 4 * i : 6 + 4 * i]
        example["has_b"][q] = [True, False, True, True, False]
    row = {"pair": "dog→man", "a": "dog", "b": "man", "starts": 3, "photos_with_b": 40,
           "arithmetic": scores, "text": scores, "photo": scores, "plus_only": scores,
           "examples": [example], "per_start": {"arithmetic": [share, share, share]}}  # fmt: skip
    skipped = {"pair": "dog→cat", "a": "dog", "b": "cat", "starts": 30, "photos_with_b": 2,
               "skipped": "2 photos of 'cat'"}  # fmt: skip
    mean = {"pairs": 1, "arithmetic": scores, "text": scores, "photo": scores,
            "likeness_any_two": 35.5, "ci95": {"arithmetic": [48.0, 52.0]}}  # fmt: skip
    return {"encoder": encoder, "data": str(FLICKR), "mean": mean, "pairs": [row, skipped]}


def test_tables(script: ModuleType) -> None:
    results = [("a.json", result("sdt-rnn", 50.0)), ("b.json", result("bow", 40.0))]
    text = script.mean_table(results) + script.table(results)
    assert '| sdt-rnn | photo − "A" + "B" | 50.0 | 48.0–52.0 | 5.0 | 40.0 |' in text
    assert '| bow | "B" alone | 40.0 | – | 5.0 | 40.0 |' in text
    assert "| bow | two photos at random | – | – | – | 35.5 |" in text
    assert "| dog→man | 3 | 40 | 50.0 | 5.0 | 50.0 | 50.0 | 40.0 | 5.0 | 40.0 | 40.0 |" in text
    line = script.difference_line(results)
    assert line.startswith("bow − sdt-rnn, photos of B in the arithmetic's top k: -10.0 points")
    assert "higher on 0 of 1 pairs" in line and script.difference_line(results[:1]) == ""
    assert "| dog→cat (skipped) | 30 | 2 | – |" in text


def test_picture(script: ModuleType, tmp_path: Path) -> None:
    paths = []
    for name, r in (("a", result("sdt-rnn", 50.0)), ("b", result("bow", 40.0))):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(r))
    out = tmp_path / "x.jpg"
    args = [*map(str, paths), "--pair", "dog→man", "--size", "40", "--out", str(out)]
    assert script.main(args) == 0
    with Image.open(out) as im:  # start row, two models, text, photo: 5 rows of 40 + 4
        assert im.size == (script.LABEL_WIDTH + 5 * 44, 5 * 44)
    with pytest.raises(SystemExit, match="no pair 'x→y'"):
        script.main([str(paths[0]), "--pair", "x→y", "--out", str(out)])
    with pytest.raises(SystemExit, match="needs --out"):
        script.main([str(paths[0]), "--pair", "dog→man"])
