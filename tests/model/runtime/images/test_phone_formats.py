"""Phones' formats: HEIC/HEIF (pillow-heif) and AVIF (pillow-avif-plugin), on real files the
plugins write here. Registered once in every process that reads photos; every orientation
decodes upright, reduced like the other formats; a HEIF's embedded thumbnail is its draft;
a truncated file is ``corrupt`` with its decoder's message, a text file named .heic
``not-an-image``; one list of formats feeds uploads, media types and the API's names."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from groundsearch.model.runtime.images.photos import (
    EXTENSIONS,
    MEDIA_TYPES,
    PHOTO_FORMATS,
    PhotoError,
    decode_photo,
    format_names,
    photo_orientation,
    register_formats,
    upload_media_types,
    upright_copy,
)
from tests.oriented import ENCODE, ORIENTATIONS, as_stored, coffee, oriented_bytes, write_oriented

#: The shorter side the shipped checkpoint's backbone (EfficientNet-Lite2) resizes to.
MIN_SIDE = 292
PHONE_FORMATS = ("HEIF", "AVIF")


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("RGB"), dtype=np.int16)


def test_the_plugins_are_registered_once_by_importing_the_decoder(tmp_path):
    assert Image.OPEN["HEIF"][0].__module__ == "pillow_heif.as_plugin"
    assert Image.OPEN["AVIF"][0].__module__ == "pillow_avif.AvifImagePlugin"
    before = dict(Image.OPEN)
    register_formats()  # a second call changes nothing
    assert before == Image.OPEN
    # a fresh process that imports only the decoder (as a spawned worker does) reads
    # both, and the AVIF plugin stays the reader after Pillow loads all of its own
    paths = []
    for fmt, name in (("HEIF", "a.heic"), ("AVIF", "a.avif")):
        coffee((60, 40)).save(tmp_path / name, format=fmt, **ENCODE[fmt])
        paths.append(str(tmp_path / name))
    code = (
        "import sys; from groundsearch.model.runtime.images.photos import decode_photo;"
        "from PIL import Image; Image.init(); print(Image.OPEN['AVIF'][0].__module__);"
        "print(*(decode_photo(p)[1] for p in sys.argv[1:]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *paths], capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:2] == ["pillow_avif.AvifImagePlugin", "HEIF AVIF"]


def test_every_listed_format_is_written_and_read_back_as_itself(tmp_path):
    """The one list: every format in it round-trips through Pillow here; its suffixes,
    media types and names are what uploads, served photos and the API use."""
    upright = coffee((90, 60))
    for name, fmt in PHOTO_FORMATS.items():
        out = io.BytesIO()
        upright.save(out, format=name, **ENCODE.get(name, {}))
        img, got = decode_photo(out.getvalue(), formats=EXTENSIONS)
        assert got == name and img.size == upright.size
        assert EXTENSIONS[name] == fmt.extension and MEDIA_TYPES[f".{fmt.extension}"]
    assert MEDIA_TYPES[".heic"] == "image/heic" and MEDIA_TYPES[".heif"] == "image/heif"
    assert MEDIA_TYPES[".avif"] == "image/avif" and EXTENSIONS["HEIF"] == "heic"
    assert format_names() == "JPEG, PNG, GIF, WebP, BMP, TIFF, HEIC/HEIF, AVIF"
    assert {"image/heic", "image/heif", "image/avif"} <= set(upload_media_types())


@pytest.mark.parametrize("fmt", PHONE_FORMATS)
def test_every_orientation_decodes_upright_and_reduced(fmt, tmp_path):
    """As a phone stores them: the pixels turned, the turn in the container's rotation
    and mirror boxes. Each decodes to the upright photo, reduced by a whole factor."""
    upright = coffee((1200, 800))
    files = write_oriented(upright, tmp_path, fmt)
    first = pixels(decode_photo(files[0], min_side=MIN_SIDE)[0])
    assert first.shape[:2] == (400, 600)  # reduced by 3: both sides stay ≥ 292
    for path in files:
        img, got_fmt = decode_photo(path)
        assert got_fmt == fmt and img.size == upright.size, path
        assert np.abs(pixels(img) - pixels(upright)).mean() < 2.0, path
        small = pixels(decode_photo(path, min_side=MIN_SIDE)[0])
        assert small.shape == first.shape and np.abs(small - first).mean() < 1.5, path
    # orientation 6 is stored sideways: a HEIF's reader turns it as it opens it, an
    # AVIF's gives the stored size and the turn as the EXIF orientation, applied here
    with Image.open(files[5]) as raw:
        shown = raw.size if fmt == "HEIF" else raw.size[::-1]
        assert shown == upright.size  # a HEIF is turned by its decoder; an AVIF by us


def test_a_heif_draft_is_its_embedded_thumbnail_when_large_enough(tmp_path):
    """pillow-heif's draft: the smallest embedded thumbnail of at least ``min_side`` on
    both sides is decoded instead of the photo; a smaller one is not used."""
    upright = coffee((1200, 900))
    for thumb, want in ((600, (600, 450)), (300, (400, 300))):
        path = tmp_path / f"t{thumb}.heic"
        upright.save(path, format="HEIF", thumbnails=[thumb], **ENCODE["HEIF"])
        img, _ = decode_photo(path, min_side=MIN_SIDE)
        # 600×450 is the thumbnail itself (450 // 292 = 1: not reduced); without a usable
        # thumbnail the 1200×900 photo is reduced by 3 to 400×300
        assert img.size == want, thumb
        assert np.abs(pixels(img) - pixels(upright.resize(want))).mean() < 6, thumb
    # and turned: a thumbnail carries the photo's rotation
    path = tmp_path / "turned.heic"
    exif = Image.Exif()
    exif[0x0112] = 6
    as_stored(upright, 6).save(
        path, format="HEIF", thumbnails=[600], exif=exif.tobytes(), **ENCODE["HEIF"]
    )
    img, _ = decode_photo(path, min_side=MIN_SIDE)
    assert img.size == (600, 450)
    assert np.abs(pixels(img) - pixels(upright.resize((600, 450)))).mean() < 6


def test_a_heif_turned_by_exif_alone_is_shown_as_stored():
    """HEIF's orientation is its container's (``irot``/``imir``); an EXIF orientation
    without them is ignored, as the format says and its viewers do (the file is served
    as stored, so the page and the vector agree)."""
    upright = coffee((120, 80))
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    # an Image.Exif, not bytes: pillow-heif then writes the EXIF tag but no rotation box
    as_stored(upright, 6).save(out, format="HEIF", exif=exif, **ENCODE["HEIF"])
    img, _ = decode_photo(out.getvalue())
    assert img.size == (80, 120)


@pytest.mark.parametrize("fmt", PHONE_FORMATS)
def test_broken_phone_files_are_named_with_their_reason(fmt, tmp_path):
    suffix = "heic" if fmt == "HEIF" else "avif"
    data = oriented_bytes(coffee(), 6, fmt)
    cut = tmp_path / f"cut.{suffix}"
    cut.write_bytes(data[: len(data) // 2])
    label = PHOTO_FORMATS[fmt].label
    for source in (cut, cut.read_bytes()):
        with pytest.raises(PhotoError, match=f"the {label} image is truncated or corrupt") as err:
            decode_photo(source, formats=EXTENSIONS)
        assert err.value.reason == "corrupt"
        assert "(" in str(err.value)  # with the decoder's own words
    with pytest.raises(PhotoError, match=f"^{re.escape(str(cut))}: "):  # named by its path
        decode_photo(cut)
    fake = tmp_path / f"notes.{suffix}"
    fake.write_text("not a photo, whatever its name says\n")
    with pytest.raises(PhotoError, match=rf"notes\.{suffix}: not an image") as err:
        decode_photo(fake)
    assert err.value.reason == "not-an-image"
    with pytest.raises(PhotoError, match="not an image \\(JPEG, PNG") as err:
        decode_photo(fake.read_bytes(), formats=EXTENSIONS)
    # cut just after its ftyp box: still the format's brand, still corrupt
    with pytest.raises(PhotoError) as err:
        decode_photo(data[:40])
    assert err.value.reason == "corrupt"
    with pytest.raises(PhotoError, match=f"unsupported image format {fmt}") as err:
        decode_photo(data, formats={"JPEG"})
    assert err.value.reason == "unsupported"


@pytest.mark.parametrize("fmt", PHONE_FORMATS)
def test_phone_formats_are_served_as_stored(fmt, tmp_path):
    """Their turn is in the container, which browsers and viewers apply: no re-encode."""
    files = write_oriented(coffee((60, 40)), tmp_path, fmt)
    for path in files:
        assert upright_copy(path) is None, path
    # the feature cache key still tells a turned AVIF from an upright one
    turns = [photo_orientation(p) for p in files]
    assert turns == ([1] * 8 if fmt == "HEIF" else list(ORIENTATIONS))
