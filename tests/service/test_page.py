"""The web page at ``/`` in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``,
driven by playwright) against the real service, which ``groundsearch serve`` starts in a
subprocess on a free localhost port. Its data directory holds a tiny Flickr8k (8 test
photos), so the service builds its default gallery — those 8 photos and their 40
captions, embedded by the shipped SDT-RNN — before it says it is ready.

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
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from groundsearch.settings import get_settings
from tests.tiny_data import FLICKR, make_tiny_flickr

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # reported by the `browser` fixture
    expect = sync_playwright = None

pytestmark = pytest.mark.slow  # a real server and a browser
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
GALLERY_PHOTOS = 8
PHRASE = "A dog runs on the beach"
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


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    if sync_playwright is None:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
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


@pytest.fixture(scope="module")
def server(browser, tmp_path_factory: pytest.TempPathFactory):
    """The base URL of ``groundsearch serve`` over a tiny Flickr8k gallery."""
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    root = tmp_path_factory.mktemp("page")
    data, cache = root / "data", root / "cache"
    make_tiny_flickr(data / "flickr8k", train=0, dev=0, test=GALLERY_PHOTOS)
    cache.mkdir()
    (cache / "glove6b50d.pretrain.pt").symlink_to(ensure_pretrain(get_settings().cache_dir))
    env = {
        **os.environ,
        "GROUNDSEARCH_DATA_DIR": str(data),
        "GROUNDSEARCH_CACHE_DIR": str(cache),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    env.pop("GROUNDSEARCH_WRITE_TOKEN", None)
    port = _free_port()
    cmd = [sys.executable, "-m", "groundsearch.cli", "serve", "--port", str(port)]
    cmd += ["--index", str(root / "gallery"), "--log-level", "warning"]
    log = root / "server.log"
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


@pytest.fixture
def page(browser, server):
    """A fresh tab on ``/``; afterwards, no request may have left the server and no
    script error may have happened."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server)
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    outside: list[str] = []
    script_errors: list[str] = []
    tab.on(
        "request",
        lambda r: None if r.url.startswith((server, "data:", "blob:")) else outside.append(r.url),
    )
    tab.on("pageerror", lambda exc: script_errors.append(str(exc)))
    tab.goto("/")
    tab.wait_for_selector("body.ready")
    yield tab
    context.close()
    assert not outside, f"the page fetched from outside the service: {outside}"
    assert not script_errors, f"script errors: {script_errors}"


def _search(page, text: str) -> None:
    page.fill("#query", text)
    page.click("#search-btn")


def _loaded_widths(page, selector: str) -> list[int]:
    page.wait_for_function(ALL_IMAGES_LOADED, arg=selector)
    return page.eval_on_selector_all(selector, "imgs => imgs.map(img => img.naturalWidth)")


def _outside_photo() -> Path:
    """A Flickr8k photo that is not in the gallery (the first training photo)."""
    name = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()[0]
    return FLICKR / "Images" / name


def test_search_shows_a_grid_of_photos_that_load(page):
    _search(page, PHRASE)
    hits = page.locator("#results .hit")
    expect(hits).to_have_count(GALLERY_PHOTOS)  # k=12 over an 8-photo gallery
    widths = _loaded_widths(page, "#results .hit img")
    assert len(widths) == GALLERY_PHOTOS and all(w > 0 for w in widths), widths
    ids = [hit.get_attribute("data-id") for hit in hits.all()]
    assert all(i.isdigit() for i in ids) and len(set(ids)) == GALLERY_PHOTOS, ids
    alts = hits.locator("img").evaluate_all("imgs => imgs.map(img => img.alt)")
    assert all(alt.strip() for alt in alts), alts  # the first caption, for screen readers
    expect(page.locator("#search-status")).to_contain_text(f"{GALLERY_PHOTOS} photos")
    expect(page.locator("#error")).to_be_hidden()


def test_the_query_tree_shows_one_node_per_word(page):
    _search(page, PHRASE)
    nodes = page.locator("#tree .node")
    expect(nodes).to_have_count(len(PHRASE.split()))
    by_index = sorted(
        (int(n.get_attribute("data-index")), n.get_attribute("data-word")) for n in nodes.all()
    )
    assert [word for _, word in by_index] == PHRASE.split()
    root = page.locator("#tree .tree-root > .node")
    expect(root).to_have_count(1)  # one root; the other words nest under it
    expect(root.locator(":scope > .node-row .size")).to_have_text(f"ℓ={len(PHRASE.split())}")
    expect(page.locator("#tree .share-bar")).to_have_count(len(PHRASE.split()))


def test_uploading_or_dropping_a_photo_lists_captions(page):
    page.set_input_files("#upload", str(_outside_photo()))
    captions = page.locator("#captions .caption")
    expect(captions).to_have_count(5)
    texts = captions.locator(".caption-text").all_inner_texts()
    assert all(t.strip() for t in texts), texts
    # the sentence the decoder wrote sits above the found captions
    written = page.locator("#written .written-text")
    expect(written).to_be_visible()
    assert written.inner_text().strip().endswith(".")
    assert written.bounding_box()["y"] < captions.first.bounding_box()["y"]
    widths = _loaded_widths(page, "#captions .caption img")
    assert all(w > 0 for w in widths), widths
    preview = page.locator("#upload-preview")
    expect(preview).to_be_visible()
    assert preview.evaluate("img => img.naturalWidth") > 0

    # the same photo dropped on the drop zone, as a file with another name
    with page.expect_response(lambda r: "/describe" in r.url) as answer:
        page.evaluate(
            """async () => {
              const preview = document.querySelector('#upload-preview');
              const blob = await (await fetch(preview.src)).blob();
              const files = new DataTransfer();
              files.items.add(new File([blob], 'dropped.jpg', {type: blob.type}));
              document.querySelector('#dropzone').dispatchEvent(
                new DragEvent('drop', {dataTransfer: files, bubbles: true, cancelable: true}));
            }"""
        )
    assert answer.value.status == 200
    expect(preview).to_have_attribute("alt", "The photo to describe: dropped.jpg")
    expect(captions).to_have_count(5)


def test_an_iphone_heic_is_described_though_chromium_cannot_show_it(page, tmp_path):
    """The file picker takes .heic; Chromium cannot draw one, so the preview hides, and
    the photo is described all the same (the server reads it)."""
    from PIL import Image

    from tests.exif_photos import Exif, write_photo

    with Image.open(_outside_photo()) as img:
        heic = write_photo(tmp_path / "IMG_0001.heic", img, Exif(orientation=6), "HEIF")
    assert ".heic" in page.locator("#upload").get_attribute("accept")
    with page.expect_response(lambda r: "/describe" in r.url) as answer:
        page.set_input_files("#upload", str(heic))
    assert answer.value.status == 200
    expect(page.locator("#captions .caption")).to_have_count(5)
    expect(page.locator("#upload-preview")).to_be_hidden()
    expect(page.locator("#error")).to_be_hidden()


def test_arithmetic_from_a_search_result(page):
    _search(page, PHRASE)
    first = page.locator("#results .hit").first
    image_id = first.get_attribute("data-id")
    first.locator(".use-this").click()
    expect(page.locator("#arith-image-id")).to_have_value(image_id)
    page.fill("#arith-minus", "dog")
    page.fill("#arith-plus", "cat, snow")
    page.check("#arith-rerank")
    with page.expect_response(lambda r: "/arithmetic" in r.url) as answer:
        page.click("#arith-btn")
    assert answer.value.status == 200
    query = parse_qs(urlsplit(answer.value.url).query)
    assert query["image_id"] == [image_id]
    assert query["minus"] == ["dog"] and query["plus"] == ["cat", "snow"]
    assert query["rerank"] == ["true"] and query["sentence"] == ["true"]
    results = page.locator("#arith-results .hit")
    expect(results.first).to_be_visible()
    expect(page.locator("#arith-written .written-text")).not_to_be_empty()
    assert 0 < results.count() <= GALLERY_PHOTOS
    assert all(w > 0 for w in _loaded_widths(page, "#arith-results .hit img"))


def test_arithmetic_from_an_uploaded_photo(page):
    page.set_input_files("#arith-upload", str(_outside_photo()))
    expect(page.locator("#arith-image-id")).to_have_value("")
    page.fill("#arith-plus", "snow")
    with page.expect_response(lambda r: "/arithmetic" in r.url) as answer:
        page.click("#arith-btn")
    assert answer.value.status == 200 and "image_id" not in answer.value.url
    expect(page.locator("#arith-results .hit").first).to_be_visible()
    expect(page.locator("#error")).to_be_hidden()


@pytest.mark.parametrize("text", ["   ", "qwxzk zzkjq"], ids=["blank", "unknown-words"])
def test_a_query_the_model_cannot_read_shows_the_error_box(page, text):
    _search(page, text)
    box = page.locator("#error")
    expect(box).to_be_visible()
    expect(box).to_contain_text("404 — text has no word the model knows")  # one message
    expect(page.locator("#results .hit")).to_have_count(0)
    _search(page, PHRASE)  # a good query clears it
    expect(page.locator("#results .hit")).to_have_count(GALLERY_PHOTOS)
    expect(box).to_be_hidden()


def test_a_query_with_no_good_match_says_so_and_shows_the_guesses_apart(page):
    _search(page, "a giraffe")  # no giraffe among the 8 photos
    note = page.locator("#results .no-match")
    expect(note).to_be_visible()
    expect(note).to_contain_text("No good match")
    weak = page.locator("#results .weak-hits .hit")
    expect(weak).to_have_count(GALLERY_PHOTOS)  # k=12: every photo, each a guess
    expect(page.locator("#results .weak-hits .weak-title")).to_contain_text("Weak matches")
    expect(page.locator("#results > .hit")).to_have_count(0)
    expect(page.locator("#results .weak-hits .relevance").first).to_contain_text("relevance")
    expect(page.locator("#search-status")).to_contain_text(f"{GALLERY_PHOTOS} photos (0 good")
