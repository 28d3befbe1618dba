"""``groundsearch teach``: a collection it cannot learn from is refused by name with
nothing written, and the verdict installs only a model better on your photos and no
worse elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundsearch.cli import main
from groundsearch.cli.teaching import NOISE, verdict
from groundsearch.common import model_sets
from groundsearch.common.settings import get_settings


@pytest.fixture
def taught(tmp_path, monkeypatch):
    folder = tmp_path / "taught"
    monkeypatch.setenv("GROUNDSEARCH_TAUGHT_DIR", str(folder))
    get_settings.cache_clear()
    yield folder
    get_settings.cache_clear()


def _collection(folder: Path, photos: int, missing: int = 0, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(photos):
        name = f"photo{i:03d}.jpg"
        if i >= missing:
            (folder / name).write_bytes(b"")
        lines.append(f"{name}\tA red kite number {i} over a beach .")
    path = folder / "captions.tsv"
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("absent", "file not found"),
        ("bad line", "are not photo<TAB>caption"),
        ("missing photos", "are not beside it: photo000.jpg, photo001.jpg"),
        ("too few", "about 60 photos or more"),
    ],
)
def test_a_collection_it_cannot_learn_from_is_refused_with_nothing_written(
    taught, tmp_path, capsys, case, message
):
    folder = tmp_path / "shop"
    path = {
        "absent": lambda: folder / "captions.tsv",
        "bad line": lambda: _collection(folder, 200, extra="no tab here\n"),
        "missing photos": lambda: _collection(folder, 200, missing=2),
        "too few": lambda: _collection(folder, 20),
    }[case]()
    assert main(["teach", str(path)]) == 2
    assert message in capsys.readouterr().err
    assert not taught.exists()  # nothing written, not even the staging folder


def test_restore_without_a_taught_model_serves_the_shipped_one(taught, capsys):
    assert main(["teach", "--restore"]) == 0
    assert "serving the shipped model" in capsys.readouterr().out
    assert model_sets.current(taught) is None


def _compared(yours: tuple[float, float], elsewhere: float) -> dict:
    return {
        "yours": {"split": "test", "photos": 30, "old": 500.0, "new": 508.0, "gain": 8.0,
                  "interval": list(yours)},
        "flickr8k": {"split": "test", "photos": 1000, "old": 290.0, "new": 290.0 + elsewhere,
                     "gain": elsewhere, "interval": [elsewhere - 3, elsewhere + 3]},
    }  # fmt: skip


def test_the_verdict_wants_a_gain_beyond_noise_and_nothing_lost_elsewhere():
    ok, why = verdict(_compared((1.5, 15.0), -NOISE + 0.5))
    assert ok and "better on your photos" in why
    ok, why = verdict(_compared((-2.0, 15.0), 0.0))  # a gain within noise
    assert not ok and "not better beyond noise" in why
    ok, why = verdict(_compared((1.5, 15.0), -NOISE - 0.5))
    assert not ok and "worse on flickr8k test" in why
