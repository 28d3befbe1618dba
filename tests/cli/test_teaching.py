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


def test_the_stages_read_the_served_model_and_its_decoder_goes_on_from_the_served_one(
    taught, tmp_path, monkeypatch, capsys
):
    """Each stage's command, recorded instead of run: the features the served checkpoint
    reads, and the caption decoder fine-tuned from the served one on a share of the
    shipped collections beside yours; the comparison's verdict keeps the served model."""
    from groundsearch.cli import teaching
    from groundsearch.model.runtime.checkpoints import load_checkpoint

    ran: list[list[str]] = []

    def run(argv: list[str], log: object) -> None:
        ran.append(argv)
        if argv[0] == "train":  # an epoch beat the init: every stage runs
            Path(argv[argv.index("--out") + 1]).with_suffix(".json").write_text('{"best_epoch": 2}')

    monkeypatch.setattr(teaching, "_run", run)
    monkeypatch.setattr(teaching, "_compare", lambda *_: _compared((-1.0, 3.0), 0.0))
    assert main(["teach", str(_collection(tmp_path / "shop", 200)), "--name", "shop"]) == 1
    assert "not better beyond noise" in capsys.readouterr().out
    s = get_settings()
    commands = {argv[0]: argv for argv in ran}
    assert ran[0][0] == "features" and len(ran) == 7
    features = commands["features"]
    assert (
        features[features.index("--backbone") + 1] == load_checkpoint(s.default_checkpoint).backbone
    )
    decoder = commands["train-decoder"]
    assert decoder[decoder.index("--init") + 1] == str(s.default_decoder)
    assert "flickr8k=0.3" in decoder and "cc-web=0.3" in decoder
    assert decoder[decoder.index("--epochs") + 1] == str(teaching.DECODER_EPOCHS)
    assert model_sets.current(taught) is None and list(taught.iterdir()) == []
