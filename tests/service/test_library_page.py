"""The page as a photo library, in a real browser (headless Chromium, as
``test_page.py``) against ``groundsearch serve`` over a library of 240 real Flickr8k
photos written with EXIF dates, cameras and GPS (``tests/service/library_gallery.py``,
built once and kept under pytest's cache): the gallery by date with its headers, pages
loaded as the grid scrolls, filters that narrow it, a photo's details on click, search
results (and a search with no good match) in the same grid, search by a photo.

``GROUNDSEARCH_SCREENSHOT=docs/img/library.png`` also writes the README's screenshot.
"""

from __future__ import annotations

import io
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from tests.service.browser import launch, loaded_widths, serve, service_folders, tab
from tests.service.library_gallery import SIZE, build

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect
except ImportError:  # reported by the `browser` fixture
    expect = None
    PlaywrightTimeout = TimeoutError

pytestmark = pytest.mark.slow  # a real server and a browser
FIRST_PAGE = 60  # the page's library page (app.js, PAGE.library)
SCREENSHOT_MAX_BYTES = 300_000


@pytest.fixture(scope="module")
def browser():
    with launch() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def library(browser, pytestconfig, parser, tmp_path_factory):
    """The base URL of ``groundsearch serve`` over the library, and its photos."""
    cache = pytestconfig.cache
    folder = (
        cache.mkdir("groundsearch-library")
        if cache is not None
        else tmp_path_factory.mktemp("library")
    )
    gallery, photos = build(Path(folder), parser)
    root = tmp_path_factory.mktemp("library-serve")
    data, service_cache = service_folders(root)
    with serve(gallery, data, service_cache, root / "server.log") as base:
        yield base, photos


@pytest.fixture
def page(browser, library):
    with tab(browser, library[0]) as opened:
        yield opened


def listing(base: str, **params) -> list[dict]:
    """Every photo ``GET /images`` lists for ``params``, in order."""
    out, cursor = [], None
    while True:
        query = {**params, "k": 100, **({"cursor": cursor} if cursor else {})}
        url = f"{base}/images?" + "&".join(
            f"{k}={urllib.request.quote(str(v))}" for k, v in query.items()
        )
        with urllib.request.urlopen(url) as r:
            answer = json.load(r)
        out += answer["results"]
        cursor = answer["next"]
        if cursor is None:
            return out


def tile_ids(page) -> list[int]:
    return [
        int(i)
        for i in page.locator("#results .tile").evaluate_all("ts => ts.map(t => t.dataset.id)")
    ]


def scroll_to_the_end(page, want: int, selector: str = "#results .tile") -> None:
    """Scroll down until ``want`` of ``selector`` (tiles) are in the grid (each scroll
    waits for the grid to grow: a ranking's page may bring guesses only)."""
    tiles = page.locator(selector)
    every = "#results .tile, #results .hit"
    for _ in range(60):
        if tiles.count() >= want:
            return
        shown = page.locator(every).count()
        page.mouse.wheel(0, 4000)
        try:  # a wheel that moved nothing (sent while the grid was busy) is sent again
            page.wait_for_function(
                """([n, want, selector, every]) =>
                  document.querySelectorAll(every).length > n ||
                  document.querySelectorAll(selector).length >= want""",
                arg=[shown, want, selector, every],
                timeout=10_000,
            )
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"{tiles.count()} of {selector} after scrolling, not {want}")


def test_the_library_browses_by_date_and_scrolling_loads_the_next_pages(page, library):
    base, photos = library
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto("/")  # again, to see its requests from the start
    tiles = page.locator("#results .tile")
    # the first page is FIRST_PAGE photos (the next may follow at once: the grid loads
    # ahead while its end is within 800 pixels of the view, which day headers decide)
    expect(tiles.nth(FIRST_PAGE - 1)).to_be_attached()
    first_page = next(u for u in requests if re.search(r"/images\?", u))
    assert f"k={FIRST_PAGE}" in first_page and "cursor=" not in first_page
    # sized before they load: the first tiles' boxes, now and once their photos are in
    boxes = [tiles.nth(i).bounding_box() for i in range(12)]
    assert all(b["width"] > 40 and b["height"] > 40 for b in boxes), boxes
    loaded_widths(page, "#results .day:first-child .tile img")
    assert [tiles.nth(i).bounding_box() for i in range(12)] == boxes
    assert all(tiles.locator("img").evaluate_all("is => is.map(i => i.loading === 'lazy')"))
    expect(page.locator("#search-status")).to_contain_text(f"{SIZE} photos — newest first")

    scroll_to_the_end(page, SIZE)
    ids = tile_ids(page)
    assert len(ids) == len(set(ids)) == SIZE  # every photo once
    assert ids == [p["id"] for p in listing(base)]  # in the server's order, newest first
    pages = [u for u in requests if re.search(r"/images\?", u)]
    assert len(pages) == -(-SIZE // FIRST_PAGE)  # one request a page
    assert all("cursor=" in u for u in pages[1:]) and "cursor=" not in pages[0]
    # thumbnails only: no full photo fetched for the grid
    assert not [u for u in requests if re.search(r"/images/\d+(\?|$)", u)]
    assert any("/thumbnail?size=" in u for u in requests)

    # one header a day, newest first, each day once (a day split by a page boundary too)
    days = page.locator("#results .day").evaluate_all("ds => ds.map(d => d.dataset.date)")
    dated = [d for d in days if d != "none"]
    assert dated == sorted(set(dated), reverse=True)
    assert set(dated) == {p["day"] for p in photos if p["taken"]}
    first = page.locator("#results .day").first
    newest = max(photos, key=lambda p: p["taken"])
    assert first.get_attribute("data-date") == newest["day"]
    expect(first.locator(".date-header")).to_contain_text("2024")
    # by month: fewer headers, the same photos in the same order
    page.select_option("#f-group", "month")
    expect(page.locator("#results .day").first).to_have_attribute("data-date", newest["day"][:7])
    scroll_to_the_end(page, SIZE)
    assert tile_ids(page) == ids
    months = page.locator("#results .day").evaluate_all("ds => ds.map(d => d.dataset.date)")
    assert months == sorted({d[:7] for d in dated}, reverse=True)
    # oldest first
    page.select_option("#f-order", "date")
    expect(page.locator("#search-status")).to_contain_text("oldest first")
    scroll_to_the_end(page, SIZE)
    assert tile_ids(page) == list(reversed(ids))


def test_filters_narrow_the_grid(page, library):
    base, photos = library
    # the first page in (the next may follow at once: the grid's load-ahead, as above)
    expect(page.locator("#results .tile").nth(FIRST_PAGE - 1)).to_be_attached()
    in_2023 = next(p for p in photos if p["day"].startswith("2023"))
    folder = str(Path(in_2023["path"]).parent.parent)  # …/photos/2023
    want = [p["id"] for p in listing(base, folder=folder)]
    assert 0 < len(want) < SIZE
    page.fill("#f-folder", folder)
    page.press("#f-folder", "Enter")
    expect(page.locator("#search-status")).to_contain_text(f"{len(want)} photos pass the filters")
    scroll_to_the_end(page, len(want))
    assert tile_ids(page) == want
    # and a camera and a date range on top
    page.fill("#f-camera", "google pixel 7")
    page.fill("#f-after", "2023-09-01")
    page.fill("#f-before", "2023-12-31")
    page.press("#f-before", "Enter")
    want = [
        p["id"]
        for p in listing(
            base, folder=folder, camera="Google Pixel 7", after="2023-09-01", before="2024-01-01"
        )
    ]
    assert want
    expect(page.locator("#search-status")).to_contain_text(f"{len(want)} photos pass the filters")
    scroll_to_the_end(page, len(want))
    assert tile_ids(page) == want
    days = page.locator("#results .day").evaluate_all("ds => ds.map(d => d.dataset.date)")
    assert all("2023-09-01" <= d <= "2023-12-31" for d in days), days
    # near Paris: only the photos with GPS there
    page.click("#f-clear")
    page.fill("#f-near", "48.8583,2.2945")
    page.fill("#f-within_km", "10")
    page.press("#f-within_km", "Enter")
    paris = {p["name"] for p in photos if p["city"] == "Paris"}
    expect(page.locator("#search-status")).to_contain_text(f"{len(paris)} photos pass the filters")
    # a filter that cannot be used says which
    page.fill("#f-near", "")
    page.press("#f-near", "Enter")
    expect(page.locator("#error")).to_contain_text("422")
    expect(page.locator("#error")).to_contain_text("within_km")


def test_clicking_a_photo_shows_its_details(page, library):
    base, photos = library
    in_paris = listing(base, near="48.8583,2.2945", within_km=10)[0]
    meta = next(p for p in photos if p["name"] == in_paris["file"])
    page.fill("#f-near", "48.8583,2.2945")
    page.fill("#f-within_km", "10")
    page.press("#f-within_km", "Enter")
    tile = page.locator(f'#results .tile[data-id="{in_paris["id"]}"]')
    tile.click()
    dialog = page.locator("#details")
    expect(dialog).to_be_visible()
    expect(page.locator("#details-title")).to_have_text(meta["name"])
    info = page.locator("#details-meta")
    expect(info).to_contain_text(meta["camera"])
    expect(info).to_contain_text(in_paris["taken"][:4])
    expect(info).to_contain_text(meta["folder"])
    expect(info).to_contain_text(f"{meta['width']} × {meta['height']}")
    link = info.locator("a.osm")
    assert link.get_attribute("href").startswith("https://www.openstreetmap.org/?mlat=48.8")
    expect(page.locator("#details-captions")).to_contain_text(meta["caption"])
    written = page.locator("#details-written .written-text")
    expect(written).to_be_visible()
    assert written.inner_text().strip().endswith(".")
    similar = page.locator("#details-similar .strip-item")
    expect(similar).to_have_count(8)
    assert all(w > 0 for w in loaded_widths(page, "#details-similar img"))
    assert page.locator("#details-img").evaluate("i => i.complete && i.naturalWidth > 0")
    # a similar photo's details in the same place
    other = similar.first.get_attribute("data-id")
    similar.first.click()
    expect(dialog).to_have_attribute("data-id", other)
    expect(page.locator("#details-written .written-text")).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # the arrows step through the grid
    page.locator("#results .tile").first.click()
    first_id = page.locator("#results .tile").first.get_attribute("data-id")
    expect(dialog).to_have_attribute("data-id", first_id)
    page.keyboard.press("ArrowRight")
    expect(dialog).to_have_attribute(
        "data-id", page.locator("#results .tile").nth(1).get_attribute("data-id")
    )


def test_search_results_fill_the_same_grid_and_the_library_comes_back(page, library):
    base, _ = library
    text = "a dog runs on the grass"
    request = urllib.request.Request(
        f"{base}/search?text={urllib.request.quote(text)}&k=1", method="POST"
    )
    with urllib.request.urlopen(request) as r:
        good = json.load(r)["total"]  # the good matches of the whole ranking
    assert good > 0
    expect(page.locator("#results .tile")).to_have_count(FIRST_PAGE)
    page.fill("#query", text)
    page.click("#search-btn")
    cards = page.locator("#results > .hit")
    expect(cards.first).to_be_visible()
    assert all(w > 0 for w in loaded_widths(page, "#results > .hit img"))  # the first page's
    # the good matches, pages of them loading as the grid scrolls (evidence may rank a
    # good match below a guess: a page's guesses wait apart), then the guesses apart
    scroll_to_the_end(page, good, "#results > .hit")
    expect(cards).to_have_count(good)
    expect(page.locator("#results .weak-hits .hit").first).to_be_visible()
    expect(page.locator("#results .tile")).to_have_count(0)
    expect(page.locator("#tree .node").first).to_be_visible()
    ranked = [int(i) for i in cards.evaluate_all("cs => cs.map(c => c.dataset.id)")]
    # date order: the same good matches, under date headers
    page.select_option("#f-order", "-date")
    expect(page.locator("#results .tile").first).to_be_visible()
    scroll_to_the_end(page, good)
    expect(page.locator("#results .tile")).to_have_count(good)
    assert sorted(tile_ids(page)) == sorted(ranked)
    days = page.locator("#results .day").evaluate_all("ds => ds.map(d => d.dataset.date)")
    assert days == sorted(days, reverse=True)
    expect(page.locator("#search-status")).to_contain_text(f"{good} photos of {good}")
    page.click("#back-to-library")
    expect(page.locator("#results .tile")).to_have_count(FIRST_PAGE)
    expect(page.locator("#search-status")).to_contain_text("newest first")


def test_a_search_with_no_good_match_says_so(page, library):
    # no laptop among the photos (a plate of sushi finds the girl eating pasta since the
    # model saw web photos: a near match, not none)
    page.fill("#query", "a laptop on a desk")
    page.click("#search-btn")
    note = page.locator("#results .no-match")
    expect(note).to_contain_text("No good match")
    expect(page.locator("#results .weak-hits .hit").first).to_be_visible()
    expect(page.locator("#results > .hit")).to_have_count(0)
    page.select_option("#f-order", "-date")  # date order holds good matches only
    expect(page.locator("#results .no-match")).to_contain_text("No good match")
    expect(page.locator("#results .hit")).to_have_count(0)


def test_search_by_a_photo_finds_it_first(page, library):
    _, photos = library
    photo = photos[5]
    page.set_input_files("#search-photo", photo["path"])
    first = page.locator("#results .hit").first
    expect(first).to_be_visible()
    expect(page.locator("#mode-text")).to_contain_text(Path(photo["path"]).name)
    first.locator(".hit-img").click()
    expect(page.locator("#details-title")).to_have_text(photo["name"])


def test_the_library_screenshot(browser, library, tmp_path):
    """The README's screenshot (``GROUNDSEARCH_SCREENSHOT`` names where it goes): the
    library at 1200×900, its colours reduced so the PNG stays small."""
    with tab(browser, library[0], width=1200, height=900) as page:
        # at this size the next page's marker may lie within the scroll margin at once:
        # the first page, or the first two
        expect(page.locator("#results .tile").nth(FIRST_PAGE - 1)).to_be_attached()
        page.locator("#library-section").scroll_into_view_if_needed()
        page.evaluate(
            "window.scrollTo(0, document.querySelector('#library-section').offsetTop - 12)"
        )
        page.wait_for_function(
            """() => [...document.querySelectorAll('#results .tile img')]
                 .filter(i => i.getBoundingClientRect().top < innerHeight)
                 .every(i => i.complete && i.naturalWidth > 0)"""
        )
        shot = Image.open(io.BytesIO(page.screenshot()))
    small = shot.convert("RGB").quantize(
        colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.FLOYDSTEINBERG
    )
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    assert shot.size == (1200, 900) and len(out.getvalue()) < SCREENSHOT_MAX_BYTES, len(
        out.getvalue()
    )
    target = os.environ.get("GROUNDSEARCH_SCREENSHOT")
    (Path(target) if target else tmp_path / "library.png").write_bytes(out.getvalue())
