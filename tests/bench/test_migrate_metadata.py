"""bench/migrate_metadata.py on a small format-2 gallery: the migration it measures
happens, keeps every checked vector and reports its time and memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "migrate_metadata.py"


@pytest.mark.slow
def test_the_migration_benchmark_runs_on_a_small_gallery(tmp_path):
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--photos", "3000", "--work", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=SCRIPT.parents[1],
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    migration = out["migration"]
    assert (migration["format"], migration["photos"]) == (3, 3000)
    assert migration["1000_random_vectors_byte_identical"] is True
    assert migration["columns"][-10:] == [
        "taken_at", "taken", "taken_source", "camera", "lat", "lon",
        "width", "height", "folder", "name",
    ]  # fmt: skip
    assert migration["peak_rss_mb_during_migration"] > 0
    assert migration["backfill_write"]["photos"] == 3000  # each filled once
    assert not (tmp_path / "w").exists()  # removed unless --keep
