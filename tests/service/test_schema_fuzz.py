"""Schemathesis over a real server: the OpenAPI document must say what the service does.

A short run (a few hundred generated cases, fixed seed, every check, the stateful phase
included) against ``groundsearch serve`` on a copy of the sample gallery, with the write
token; the project's ``schemathesis.toml`` is used as a reviewer would. The long run
(≥ 5,000 cases) is ``make reliability`` (docs/RELIABILITY.md).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.real_server import Server, server_env

pytestmark = pytest.mark.slow  # a real server and the schemathesis CLI in subprocesses

REPO = Path(__file__).resolve().parents[2]
TOKEN = "schema-fuzz-write-token-0123456789"
SEED = 11
MAX_EXAMPLES = 12


def test_schemathesis_finds_no_failure(service_gallery: Path, tmp_path: Path):
    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    cache = tmp_path / "cache"
    cache.mkdir()
    server = Server(gallery, server_env(cache, TOKEN), tmp_path / "server.log")
    server.start()
    try:
        server.ready()
        cmd = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{server.base}/openapi.json",
            # every check runs by default; no --checks on the command line, which would
            # override schemathesis.toml's per-operation settings
            f"--header=Authorization: Bearer {TOKEN}",
            f"--max-examples={MAX_EXAMPLES}",
            f"--seed={SEED}",
            "--workers=1",
            "--continue-on-failure",
        ]
        run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    finally:
        server.kill()
    out = run.stdout + run.stderr
    cases = re.search(r"(\d+) generated", out)
    assert run.returncode == 0 and "No issues found" in out, out[-6000:]
    assert cases and int(cases.group(1)) >= 200, out[-2000:]
    assert "Traceback" not in server.tail()
