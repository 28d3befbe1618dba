"""A photo filter: checked when made (each bad value names its query parameter), parsed
from query strings, and its conditions over columns in memory."""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

from groundsearch.index.filters.conditions import (
    FILTER_NAMES,
    FilterError,
    PhotoFilter,
    haversine_km,
    parse_time,
)

JULY = 1_719_792_000.0  # 2024-07-01T00:00:00Z


def test_each_filter_is_declared_once_as_a_field_and_a_query_parameter():
    assert tuple(f.name for f in dataclasses.fields(PhotoFilter)) == FILTER_NAMES
    assert tuple(inspect.signature(PhotoFilter.from_query).parameters) == FILTER_NAMES


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"after": float("nan")}, "after"),
        ({"after": "yesterday"}, "after"),
        ({"before": True}, "before"),
        ({"before": 1e20}, "before"),
        ({"after": JULY, "before": JULY}, "before"),
        ({"after": JULY + 1, "before": JULY}, "before"),
        ({"folder": ""}, "folder"),
        ({"folder": "   "}, "folder"),
        ({"folder": "photos/2024"}, "folder"),
        ({"folder": "/a\x00b"}, "folder"),
        ({"folder": 3}, "folder"),
        ({"camera": ""}, "camera"),
        ({"near": (91.0, 0.0)}, "near"),
        ({"near": (-90.5, 0.0)}, "near"),
        ({"near": (0.0, 180.01)}, "near"),
        ({"near": (0.0, -181.0)}, "near"),
        ({"near": (float("inf"), 0.0)}, "near"),
        ({"near": (1.0,)}, "near"),
        ({"near": "48.8,2.3"}, "near"),
        ({"within_km": 5.0}, "within_km"),
        ({"near": (0.0, 0.0), "within_km": 0.0}, "within_km"),
        ({"near": (0.0, 0.0), "within_km": -1.0}, "within_km"),
        ({"near": (0.0, 0.0), "within_km": 20_000.5}, "within_km"),
        ({"near": (0.0, 0.0), "within_km": float("nan")}, "within_km"),
        ({"source": "camera"}, "source"),
        ({"source": ""}, "source"),
    ],
)
def test_a_bad_value_names_its_parameter(kwargs, parameter):
    with pytest.raises(FilterError) as caught:
        PhotoFilter(**kwargs)
    assert caught.value.parameter == parameter
    assert isinstance(caught.value, ValueError) and parameter in str(caught.value)


def test_good_values_are_kept_normalised():
    f = PhotoFilter(folder="/a/b/", camera="  Apple iPhone 12 ", near=(90, -180), source="upload")
    assert (f.folder, f.camera, f.near, f.source) == (
        "/a/b",
        "Apple iPhone 12",
        (90.0, -180.0),
        "upload",
    )
    assert PhotoFilter(folder="//a/./b/../c").folder == "/a/c"
    assert PhotoFilter(folder="/").folder == "/"
    assert PhotoFilter(near=(1, 2)).radius_km == 1.0
    assert PhotoFilter(near=(1, 2), within_km=20_000).radius_km == 20_000.0
    assert PhotoFilter(after=np.float64(JULY)).after == JULY
    assert not PhotoFilter() and PhotoFilter(source="folder")
    assert PhotoFilter(after=1.0, camera="x", near=(0, 0)).conditions == ("date", "camera", "near")
    assert PhotoFilter(before=1.0) == PhotoFilter(before=1)  # frozen, comparable, hashable
    assert len({PhotoFilter(before=1.0), PhotoFilter(before=1)}) == 1


def test_query_strings_are_parsed_or_refused_by_name():
    f = PhotoFilter.from_query(
        after="2024-07-01", before="2024-07-01T18:03:05+02:00", near=" 48.85, 2.35", within_km="5"
    )
    assert f.after == JULY and f.before == JULY + 16 * 3600 + 3 * 60 + 5
    assert f.near == (48.85, 2.35) and f.within_km == 5.0
    assert parse_time("2024-07-01T00:00:00", "after") == JULY  # no offset: read as UTC
    assert parse_time("2024-07-01T00:00:00Z", "after") == JULY
    for kwargs, parameter in [
        ({"after": "2024-13-01"}, "after"),
        ({"before": "last week"}, "before"),
        ({"near": "48.85"}, "near"),
        ({"near": "north,2.35"}, "near"),
        ({"near": "1,2,3"}, "near"),
        ({"near": "0,0", "within_km": "far"}, "within_km"),
        ({"within_km": "3"}, "within_km"),
        ({"after": "2024-07-02", "before": "2024-07-01"}, "before"),
    ]:
        with pytest.raises(FilterError) as caught:
            PhotoFilter.from_query(**kwargs)
        assert caught.value.parameter == parameter, kwargs


def test_haversine_distances_are_great_circles():
    # Paris to London, about 344 km; a quarter of a meridian, 10,008 km
    assert haversine_km(48.8566, 2.3522, np.array([51.5074]), np.array([-0.1278]))[0] == (
        pytest.approx(343.5, abs=1.0)
    )
    assert haversine_km(0, 0, np.array([90.0]), np.array([0.0]))[0] == pytest.approx(
        math.pi / 2 * 6371.0088
    )
    # across the antimeridian: 0.2° of longitude at the equator, about 22 km
    assert haversine_km(0, 179.9, np.array([0.0]), np.array([-179.9]))[0] == pytest.approx(
        22.24, abs=0.05
    )


def test_masks_state_each_condition_over_columns():
    columns = {
        "taken_at": np.array([JULY - 1, JULY, JULY + 10, np.nan, JULY + 5]),
        "folder": np.array(["/a/b", "/a/bc", "/a/b/c", None, "/x"], dtype=object),
        "camera": np.array(
            ["apple iphone 12", None, "apple iphone 12", "canon", "x"], dtype=object
        ),
        "lat": np.array([48.85, 48.86, np.nan, 0.0, 48.9]),
        "lon": np.array([2.35, 2.35, np.nan, 0.0, 2.35]),
        "uploaded": np.array([False, False, False, True, False]),
    }
    f = PhotoFilter(
        after=JULY,
        before=JULY + 10,
        folder="/a/b",
        camera="Apple iPhone 12",
        near=(48.85, 2.35),
        within_km=2,
        source="folder",
    )
    masks = f.masks(columns)
    assert masks["date"].tolist() == [False, True, False, False, True]
    assert masks["folder"].tolist() == [True, False, True, False, False]
    assert masks["camera"].tolist() == [True, False, True, False, False]
    assert masks["near"].tolist() == [True, True, False, False, False]  # 48.9: 5.6 km
    assert masks["source"].tolist() == [True, True, True, False, True]
    assert PhotoFilter(source="upload").masks(columns)["source"].tolist() == [0, 0, 0, 1, 0]
    assert PhotoFilter(folder="/").masks(columns)["folder"].tolist() == [1, 1, 1, 0, 1]
