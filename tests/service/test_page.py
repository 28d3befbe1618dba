"""The web page at ``/`` in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``,
driven by playwright) against the real service, which ``groundsearch serve`` starts in a
subprocess on a free localhost port. Its data directory holds a tiny Flickr8k (8 test
photos), so the service builds its default gallery — those 8 photos and their 40
captions, embedded by the shipped SDT-RNN — before it says it is ready.

Without Chromium (or playwright) the tests skip, unless ``CI`` is set: CI must run them.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.service.browser import launch, loaded_widths, serve, service_folders, tab
from tests.tiny_data import FLICKR, make_tiny_flickr

try:
    from playwright.sync_api import expect
except ImportError:  # reported by the `browser` fixture
    expect = None

pytestmark = pytest.mark.slow  # a real server and a browser
GALLERY_PHOTOS = 8
PHRASE = "A dog runs on the beach"


@pytest.fixture(scope="module")
def browser():
    with launch() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def server(browser, tmp_path_factory: pytest.TempPathFactory):
    """The base URL of ``groundsearch serve`` over a tiny Flickr8k gallery."""
    root = tmp_path_factory.mktemp("page")
    data, cache = service_folders(root)
    make_tiny_flickr(data / "flickr8k", train=0, dev=0, test=GALLERY_PHOTOS)
    with serve(root / "gallery", data, cache, root / "server.log") as base:
        yield base


@pytest.fixture
def page(browser, server):
    """A fresh tab on ``/``; afterwards, no request may have left the server and no
    script error may have happened."""
    with tab(browser, server) as opened:
        yield opened


def _search(page, text: str) -> None:
    page.fill("#query", text)
    page.click("#search-btn")


def _outside_photo() -> Path:
    """A Flickr8k photo that is not in the gallery (the first training photo)."""
    name = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()[0]
    return FLICKR / "Images" / name


def test_search_shows_a_grid_of_photos_that_load(page):
    _search(page, PHRASE)
    hits = page.locator("#results .hit")
    expect(hits).to_have_count(GALLERY_PHOTOS)  # k=12 over an 8-photo gallery
    widths = loaded_widths(page, "#results .hit img")
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
    widths = loaded_widths(page, "#captions .caption img")
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
    assert all(w > 0 for w in loaded_widths(page, "#arith-results .hit img"))


def test_arithmetic_from_an_uploaded_photo(page):
    page.set_input_files("#arith-upload", str(_outside_photo()))
    expect(page.locator("#arith-image-id")).to_have_value("")
    page.fill("#arith-plus", "snow")
    with page.expect_response(lambda r: "/arithmetic" in r.url) as answer:
        page.click("#arith-btn")
    assert answer.value.status == 200 and "image_id" not in answer.value.url
    expect(page.locator("#arith-results .hit").first).to_be_visible()
    expect(page.locator("#error")).to_be_hidden()


def test_a_busy_server_is_asked_again_after_its_retry_after(page):
    """A 429 (the CNN's queue full) is not shown: the upload is sent again after the
    answer's Retry-After, and its captions come."""
    refused = []

    def busy_once(route) -> None:
        if not refused:
            refused.append(route.request.url)
            route.fulfill(
                status=429,
                headers={"Retry-After": "1"},
                content_type="application/problem+json",
                body='{"detail": "the server is busy (cnn work queue full): retry in 1 s"}',
            )
        else:
            route.continue_()

    page.route("**/describe?*", busy_once)
    page.set_input_files("#upload", str(_outside_photo()))
    expect(page.locator("#captions .caption")).to_have_count(5)
    assert len(refused) == 1
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
