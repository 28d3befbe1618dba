"""What the page's browser tests share: headless Chromium (Debian's ``/usr/bin/chromium``,
driven by playwright), ``groundsearch serve`` in a subprocess on a free localhost port,
and a tab that fails its test if the page fetched anything from outside the service or
a script error happened.

Without Chromium (or playwright) the tests skip, unless ``CI`` is set: CI must run them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from groundsearch.common.settings import get_settings

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # reported by `launch`
    sync_playwright = None

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
]
READY_TIMEOUT_S = 300
ALL_IMAGES_LOADED = """sel => {
  const imgs = [...document.querySelectorAll(sel)];
  return imgs.length > 0 && imgs.every(img => img.complete);
}"""


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason}; CI must run the browser tests", pytrace=False)
    pytest.skip(reason)


@contextmanager
def launch() -> Iterator:
    """Headless Chromium (skips without it, fails in CI)."""
    if not CHROMIUM.is_file():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    if sync_playwright is None:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the service exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/ready", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"the service was not ready in {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def service_folders(root: Path) -> tuple[Path, Path]:
    """A data folder and a cache folder (with the shared GloVe pretrain) under ``root``."""
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    data, cache = root / "data", root / "cache"
    data.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    pretrain = cache / "glove6b50d.pretrain.pt"
    if not pretrain.exists():
        pretrain.symlink_to(ensure_pretrain(get_settings().cache_dir))
    return data, cache


@contextmanager
def serve(index: Path, data: Path, cache: Path, log: Path) -> Iterator[str]:
    """The base URL of ``groundsearch serve --index INDEX`` (no write token), stopped after."""
    env = {
        **os.environ,
        "GROUNDSEARCH_DATA_DIR": str(data),
        "GROUNDSEARCH_CACHE_DIR": str(cache),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    env.pop("GROUNDSEARCH_WRITE_TOKEN", None)
    port = _free_port()
    cmd = [sys.executable, "-m", "groundsearch.cli", "serve", "--port", str(port)]
    cmd += ["--index", str(index), "--log-level", "warning"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def tab(browser, base: str, width: int = 1280, height: int = 900) -> Iterator:
    """A fresh tab on ``/``, ready; afterwards, no request may have left the server and
    no script error may have happened."""
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=base)
    page = context.new_page()
    page.set_default_timeout(60_000)
    outside: list[str] = []
    script_errors: list[str] = []
    page.on(
        "request",
        lambda r: None if r.url.startswith((base, "data:", "blob:")) else outside.append(r.url),
    )
    page.on("pageerror", lambda exc: script_errors.append(str(exc)))
    page.goto("/")
    page.wait_for_selector("body.ready")
    try:
        yield page
    finally:
        context.close()
    assert not outside, f"the page fetched from outside the service: {outside}"
    assert not script_errors, f"script errors: {script_errors}"


def loaded_widths(page, selector: str) -> list[int]:
    """The natural widths of the images ``selector`` names, once every one has loaded."""
    page.wait_for_function(ALL_IMAGES_LOADED, arg=selector)
    return page.eval_on_selector_all(selector, "imgs => imgs.map(img => img.naturalWidth)")
