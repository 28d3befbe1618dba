"""What a photo file says, read from real EXIF blocks (written by Pillow as cameras write
them): the date with and without its offset, the file's time without one, the camera,
the GPS place, the size as shown; broken values are None, never an exception."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image, ImageFile
from PIL.TiffImagePlugin import IFDRational

from groundsearch.index.store.photo_metadata import (
    PhotoMetadata,
    exif_time,
    read_metadata,
    read_upload_metadata,
    upload_name,
)
from tests.exif_photos import Exif, exif_block, photo_bytes, write_photo
from tests.oriented import coffee

#: 2024-07-01 18:03:05 at UTC+2 is 16:03:05 UTC.
PHONE = Exif(
    original="2024:07:01 18:03:05",
    offset="+02:00",
    date_time="2024:07:02 09:00:00",  # edited later: DateTimeOriginal wins
    make="Apple",
    model="iPhone 12",
    orientation=6,
    lat=48.8583,
    lon=2.2945,
)
MTIME = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    return coffee((120, 80))  # landscape, upright


def with_mtime(path: Path) -> Path:
    os.utime(path, (MTIME, MTIME))
    return path


def test_a_phone_photo_gives_its_date_offset_camera_place_and_upright_size(tmp_path, photo):
    path = write_photo(tmp_path / "trip" / "IMG_0001.jpg", photo, PHONE)
    with Image.open(path) as stored:
        assert stored.size == (80, 120)  # stored turned a quarter (orientation 6)
    meta = read_metadata(path)
    assert meta == PhotoMetadata(
        taken_at=datetime(2024, 7, 1, 16, 3, 5, tzinfo=UTC).timestamp(),
        taken="2024-07-01T18:03:05+02:00",
        taken_source="exif",
        camera="Apple iPhone 12",
        lat=pytest.approx(48.8583, abs=1e-6),
        lon=pytest.approx(2.2945, abs=1e-6),
        width=120,
        height=80,
        folder=str(tmp_path / "trip"),
        name="IMG_0001.jpg",
    )
    assert meta.place == (meta.lat, meta.lon)


def test_without_an_offset_the_wall_clock_is_read_as_utc(tmp_path, photo):
    path = write_photo(tmp_path / "a.jpg", photo, Exif(original="2019:12:31 23:59:59"))
    meta = read_metadata(path)
    assert meta.taken == "2019-12-31T23:59:59"  # as the file says it: no offset
    assert meta.taken_at == datetime(2019, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    assert meta.taken_source == "exif"
    assert (meta.camera, meta.place, meta.width, meta.height) == (None, None, 120, 80)


def test_ifd0_datetime_is_the_last_exif_date(tmp_path, photo):
    path = write_photo(tmp_path / "a.jpg", photo, Exif(date_time="2010:05:06 07:08:09"))
    assert read_metadata(path).taken == "2010-05-06T07:08:09"


def test_south_and_west_are_negative(tmp_path, photo):
    rio = Exif(original="2016:08:05 20:00:00", offset="-03:00", lat=-22.9068, lon=-43.1729)
    meta = read_metadata(write_photo(tmp_path / "rio.jpg", photo, rio))
    assert meta.lat == pytest.approx(-22.9068, abs=1e-6)
    assert meta.lon == pytest.approx(-43.1729, abs=1e-6)
    assert meta.taken == "2016-08-05T20:00:00-03:00"
    assert meta.taken_at == datetime(2016, 8, 5, 23, 0, 0, tzinfo=UTC).timestamp()


def test_a_photo_without_exif_is_dated_by_its_file(tmp_path, photo):
    path = with_mtime(write_photo(tmp_path / "plain.jpg", photo))
    meta = read_metadata(path)
    assert meta == PhotoMetadata(
        taken_at=MTIME,
        taken="2021-03-04T05:06:07+00:00",
        taken_source="file",
        width=120,
        height=80,
        folder=str(tmp_path),
        name="plain.jpg",
    )


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
def test_png_and_webp_exif_is_read_without_decoding_pixels(tmp_path, photo, fmt, monkeypatch):
    path = tmp_path / f"a.{fmt.lower()}"
    path.write_bytes(photo_bytes(photo, PHONE, fmt))

    def no_decoding(self):  # Pillow's PNG getexif() would load the pixels to look further
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    meta = read_metadata(path)
    assert (meta.taken, meta.camera, meta.width, meta.height) == (
        "2024-07-01T18:03:05+02:00",
        "Apple iPhone 12",
        120,
        80,
    )


@pytest.mark.parametrize(("fmt", "suffix"), [("HEIF", "heic"), ("AVIF", "avif")])
def test_a_phones_heic_or_avif_says_the_same_without_decoding_pixels(
    tmp_path, photo, fmt, suffix, monkeypatch
):
    """What pillow-heif and pillow-avif-plugin write (the EXIF item; the orientation as
    the container's rotation) reads as the JPEG's does, from the headers alone."""
    path = write_photo(tmp_path / "trip" / f"IMG_0001.{suffix}", photo, PHONE, fmt)
    reader = Image.OPEN[fmt][0]

    def no_decoding(self):
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(reader, "load", no_decoding)
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    want = read_metadata(write_photo(tmp_path / "trip" / "IMG_0001.jpg", photo, PHONE))
    assert read_metadata(path) == replace(want, name=f"IMG_0001.{suffix}")
    assert (want.width, want.height, want.camera) == (120, 80, "Apple iPhone 12")
    upload = read_upload_metadata(path.read_bytes(), f"IMG_0001.{suffix}")
    assert upload == replace(want, folder=None, name=f"IMG_0001.{suffix}")


def test_a_truncated_heic_is_dated_by_its_file(tmp_path, photo):
    """libheif refuses a file whose picture runs past its end, headers and all."""
    data = photo_bytes(photo, PHONE, "HEIF")
    path = tmp_path / "cut.heic"
    path.write_bytes(data[: len(data) // 2])
    with_mtime(path)
    meta = read_metadata(path)
    assert (meta.taken_source, meta.taken_at, meta.camera, meta.width) == (
        "file",
        MTIME,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("make", "model", "camera"),
    [
        ("Canon", "Canon EOS R5", "Canon EOS R5"),  # the make is not repeated
        ("  NIKON CORPORATION ", "NIKON D750\x00", "NIKON CORPORATION NIKON D750"),
        ("samsung", "SAMSUNG  Galaxy S21", "SAMSUNG Galaxy S21"),  # case-insensitive
        ("FUJIFILM", None, "FUJIFILM"),
        (None, "X100V", "X100V"),
        ("   ", "\x00", None),
    ],
)
def test_camera_names(tmp_path, photo, make, model, camera):
    path = write_photo(tmp_path / "a.jpg", photo, Exif(make=make, model=model))
    assert read_metadata(path).camera == camera


@pytest.mark.parametrize(
    ("lat", "lon"),
    [
        ((95, 1), (20, 1)),  # a latitude past the pole
        ((45, 1), (1, 0)),  # a zero denominator
        ((45, 1, 30, 1, 0, 1, 7, 1), (20, 1)),  # four numbers: not degrees, minutes, seconds
    ],
)
def test_broken_values_are_none_and_the_rest_is_read(tmp_path, photo, lat, lon):
    """An unset clock, an impossible offset, a broken GPS fix: each field alone is None."""
    exif = exif_block(Exif(make="Apple", model="iPhone 12"))
    sub = exif.get_ifd(0x8769)
    sub[0x9003] = "0000:00:00 00:00:00"  # an unset camera clock
    sub[0x9011] = "+99:00"
    exif[0x0132] = "    :  :     :  :  "  # blanks, as some cameras write
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", tuple(IFDRational(*lat[i : i + 2]) for i in range(0, len(lat), 2))
    gps[3], gps[4] = "E", tuple(IFDRational(*lon[i : i + 2]) for i in range(0, len(lon), 2))
    path = tmp_path / "broken.jpg"
    path.write_bytes(photo_bytes(photo, exif=exif))
    with_mtime(path)
    meta = read_metadata(path)
    assert (meta.taken_source, meta.taken_at) == ("file", MTIME)
    assert (meta.lat, meta.lon) == (None, None)
    assert (meta.camera, meta.width, meta.height) == ("Apple iPhone 12", 120, 80)
    good = exif_block(Exif(lat=45.0, lon=20.0))
    path.write_bytes(photo_bytes(photo, exif=good))
    assert read_metadata(path).place == (45.0, 20.0)  # the same block, unbroken


def test_null_island_and_a_bad_ref_are_no_place(tmp_path, photo):
    zero = read_metadata(write_photo(tmp_path / "z.jpg", photo, Exif(lat=0.0, lon=0.0)))
    assert zero.place is None  # what a receiver without a fix writes
    exif = exif_block(Exif(lat=10.0, lon=20.0))
    exif.get_ifd(0x8825)[1] = "Q"
    path = tmp_path / "q.jpg"
    path.write_bytes(photo_bytes(photo, exif=exif))
    assert read_metadata(path).place is None


def test_a_file_pillow_cannot_open_has_only_its_folder_name_and_time(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_text("not a photo")
    with_mtime(path)
    assert read_metadata(path) == PhotoMetadata(
        taken_at=MTIME,
        taken="2021-03-04T05:06:07+00:00",
        taken_source="file",
        folder=str(tmp_path),
        name="notes.jpg",
    )
    with pytest.raises(OSError):
        read_metadata(tmp_path / "missing.jpg")


def test_a_truncated_jpeg_still_gives_its_header(tmp_path, photo):
    data = photo_bytes(photo, PHONE)
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])  # the pixel data cut, the headers whole
    meta = read_metadata(path)
    assert (meta.taken, meta.camera) == ("2024-07-01T18:03:05+02:00", "Apple iPhone 12")
    assert (meta.width, meta.height) == (120, 80)


def test_an_upload_has_no_folder_no_file_time_and_its_given_name(photo):
    meta = read_upload_metadata(photo_bytes(photo, PHONE), "C:\\Users\\me\\IMG_0001.jpg")
    assert (meta.taken, meta.taken_source, meta.folder, meta.name) == (
        "2024-07-01T18:03:05+02:00",
        "exif",
        None,
        "IMG_0001.jpg",
    )
    plain = read_upload_metadata(photo_bytes(photo), None)
    assert plain == PhotoMetadata(width=120, height=80)  # no date: an upload has no mtime
    assert read_upload_metadata(b"not a photo", "x.jpg") == PhotoMetadata(name="x.jpg")


@pytest.mark.parametrize(
    ("given", "kept"),
    [("../../etc/passwd", "passwd"), ("a/b\\c.jpg", "c.jpg"), ("", None), ("x\x00\n.jpg", "x.jpg")],
)
def test_upload_names_are_their_last_component(given, kept):
    assert upload_name(given) == kept
    assert upload_name("a" * 1000) == "a" * 255


@pytest.mark.parametrize(
    ("date", "offset", "expected"),
    [
        ("2024:02:29 12:00:00", "+05:30", "2024-02-29T12:00:00+05:30"),
        ("2023:02:29 12:00:00", None, None),  # no such day
        ("2024-07-01 18:03:05", None, "2024-07-01T18:03:05"),  # dashes, as some tools write
        ("2024:07:01 18:03:05", "Z", "2024-07-01T18:03:05"),  # not an offset: left out
        ("yesterday", "+01:00", None),
        (None, None, None),
    ],
)
def test_exif_times(date, offset, expected):
    found = exif_time(date, offset)
    assert (found[1] if found else None) == expected
    if found is not None:
        assert (
            found[0]
            == datetime.fromisoformat(
                expected if "+" in expected else expected + "+00:00"
            ).timestamp()
        )
