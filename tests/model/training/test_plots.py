"""Training-curve plots and ``groundsearch plot``."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from groundsearch.cli import main
from groundsearch.model.training.plots import (
    SummaryError,
    best_epoch_of,
    load_summary,
    plot_history,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HISTORY = {"loss": [8.3, 3.1, 2.0, 1.5], "dev_rsum": [147.6, 170.6, 173.7, 170.0], "lr": [1e-3] * 4}


def assert_png(path):
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG_MAGIC
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        assert img.format == "PNG" and img.width > 100 and img.height > 100


def test_plot_history_writes_a_png_atomically(tmp_path):
    out = tmp_path / "sub" / "curve.png"
    plot_history(HISTORY, out, "sdt-rnn")
    assert_png(out)
    assert [p.name for p in out.parent.iterdir()] == ["curve.png"]  # no temp file left


def test_best_epoch_is_the_first_highest_dev_rsum():
    assert best_epoch_of([1.0, 3.0, 2.0, 3.0]) == 2
    assert best_epoch_of([float("nan"), 1.0]) == 2
    assert best_epoch_of([float("nan")]) is None


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ({"loss": [1.0]}, "history\\['dev_rsum'\\] must be a list of numbers"),
        ({"loss": [], "dev_rsum": []}, "no epochs"),
        ({"loss": [1.0, 2.0], "dev_rsum": [3.0]}, "2 losses but 1 dev rsums"),
        ({"loss": ["a"], "dev_rsum": [3.0]}, "must be a list of numbers"),
        ([1, 2], "history must be an object"),
    ],
)
def test_malformed_history_is_named(history, message, tmp_path):
    with pytest.raises(SummaryError, match=message):
        plot_history(history, tmp_path / "x.png", "t")
    assert not (tmp_path / "x.png").exists()


def test_cli_plot_defaults_to_the_summary_name(tmp_path, capsys):
    src = tmp_path / "sdt.json"
    src.write_text(json.dumps({"encoder": "sdt-rnn", "best_epoch": 3, "history": HISTORY}))
    assert main(["plot", str(src)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "sdt.png")
    assert_png(tmp_path / "sdt.png")
    assert main(["plot", str(src), "--out", str(tmp_path / "o" / "c.png")]) == 0
    assert_png(tmp_path / "o" / "c.png")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "training summary not found"),
        ("{not json", "is not a JSON training summary"),
        ("[1, 2]", "is not a training summary: it has no 'history'"),
        ('{"encoder": "bow"}', "is not a training summary: it has no 'history'"),
        ('{"history": {"loss": [1.0], "dev_rsum": []}}', "1 losses but 0 dev rsums"),
    ],
)
def test_cli_plot_errors_are_named(content, message, tmp_path, capsys):
    src = tmp_path / "run.json"
    if content is not None:
        src.write_text(content)
    assert main(["plot", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groundsearch plot: error: ") and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "run.png").exists()


def test_cli_plot_of_a_checkpoint_points_at_its_json(tmp_path, capsys):
    (tmp_path / "m.pt").write_bytes(b"PK\x03\x04\x80\x81binary")
    assert main(["plot", str(tmp_path / "m.pt")]) == 2
    assert "give the .json written beside the checkpoint" in capsys.readouterr().err


def test_load_summary_returns_the_summary(tmp_path):
    src = tmp_path / "s.json"
    src.write_text(json.dumps({"encoder": "bow", "history": HISTORY}))
    assert load_summary(src)["encoder"] == "bow"
