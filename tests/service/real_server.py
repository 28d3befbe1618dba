"""A real ``groundsearch serve`` in a subprocess, for the tests that need one.

``server_env`` is the environment of such processes (a temp cache with the GloVe
pretrain linked, no caption bank, parsing in the server process, a write token);
``Server`` starts, waits for, kills and restarts the server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from groundsearch.common.settings import get_settings

READY_TIMEOUT_S = 180


def server_env(cache: Path, token: str) -> dict[str, str]:
    """The environment of server subprocesses whose cache is ``cache``."""
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    (cache / "glove6b50d.pretrain.pt").symlink_to(ensure_pretrain(get_settings().cache_dir))
    return {
        **os.environ,
        "GROUNDSEARCH_CACHE_DIR": str(cache),
        "GROUNDSEARCH_CAPTION_BANK": "none",
        "GROUNDSEARCH_PARSE_WORKERS": "0",
        "GROUNDSEARCH_WRITE_TOKEN": token,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
    """Signal the process; then make sure nothing of its process group is left."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    # helpers it started (its own session: nothing else is in the group)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Server:
    """``groundsearch serve --index GALLERY`` in a subprocess, started again and again."""

    def __init__(
        self, gallery: Path, env: dict[str, str], log: Path, extra: Sequence[str] = ()
    ) -> None:
        self.gallery, self.env, self.log = gallery, env, log
        #: more flags of ``serve`` (``--sample``)
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None
        self.base = ""
        self.starts = 0

    def start(self) -> None:
        port = free_port()
        cmd = [sys.executable, "-m", "groundsearch.cli", "serve", "--port", str(port)]
        cmd += ["--index", str(self.gallery), "--log-level", "warning", *self.extra]
        self.starts += 1
        with open(self.log, "a") as out:
            out.write(f"\n=== start {self.starts} ===\n")
            out.flush()
            self.proc = subprocess.Popen(
                cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.base = f"http://127.0.0.1:{port}"

    def ready(self) -> dict:
        """Wait for ``/ready``; its answer."""
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                res = httpx.get(self.base + "/ready", timeout=5)
                if res.status_code == 200:
                    return res.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        pytest.fail(f"the server was not ready in {READY_TIMEOUT_S} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None:
            stop(self.proc, signal.SIGKILL)

    def terminate(self) -> int:
        """SIGTERM: a clean shutdown (the search indexes are snapshotted); exit status."""
        assert self.proc is not None
        stop(self.proc, signal.SIGTERM, timeout=60)
        return self.proc.returncode

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]
