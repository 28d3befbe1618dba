"""RayFeaturePool, the Ray Data backend: its arguments, an address tried before
``ray.init`` waits for it, windows read lazily, a failed window finished in this process.
Whether a local Ray cluster builds the gallery the local path builds is
tests/index/test_ray_indexing.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groundsearch.model.runtime.images.backbones import BackboneError
from groundsearch.model.runtime.images.backend import FeatureBackend
from groundsearch.model.runtime.images.photos import PhotoError
from groundsearch.model.runtime.images.pool import FeaturePool
from groundsearch.model.runtime.images.ray_pool import (
    RayClusterError,
    RayFeaturePool,
    _check_reachable,
)


def test_both_backends_are_feature_backends():
    for backend in (FeaturePool, RayFeaturePool):
        assert FeatureBackend in backend.__mro__  # declared, so mypy checks the methods
        assert backend.__exit__ is FeatureBackend.__exit__  # the shared one: close()


def test_an_address_is_tried_before_ray_init_waits_for_it():
    for address in ("127.0.0.1:1", "ray://127.0.0.1:1", "ray://[::1]:1"):
        with pytest.raises(OSError):
            _check_reachable(address)
    _check_reachable("a-name-without-a-port")  # left to ray.init


def test_the_pool_checks_its_arguments():
    with pytest.raises(ValueError, match="≥ 1"):
        RayFeaturePool("efficientnet-lite0", "local", actors=0)
    with pytest.raises(BackboneError, match="resnet9000"):
        RayFeaturePool("resnet9000", "local")


class FakeRay:
    """Stands for the ray module where the pool only needs its exception class."""

    class exceptions:  # like ray.exceptions
        class RayError(Exception):
            pass


def test_windows_are_read_lazily_and_a_failed_window_is_finished_here(monkeypatch):
    pool = RayFeaturePool("efficientnet-lite0", "local", window=4)
    pool._ray = FakeRay  # as if connected: map runs its windows through _run
    read: list[int] = []
    calls: list[list[int]] = []

    def items():
        for i in range(10):
            read.append(i)
            yield i

    def run(window, path_of):
        calls.append(list(window))
        if len(calls) == 2:  # the second window's job fails after one result
            yield 1, np.full(2, 5.0, np.float32)
            raise FakeRay.exceptions.RayError("an actor died three times")
        for i in reversed(range(len(window))):  # results come unordered
            yield i, np.full(2, float(window[i]), np.float32)

    here = []

    def embed_here(rest, path_of):
        here.extend(rest)
        return ((item, PhotoError("corrupt", f"{path_of(item)}: here")) for item in rest)

    monkeypatch.setattr(pool, "_run", run)
    monkeypatch.setattr(pool, "_here", embed_here)
    out = pool.map(items(), lambda i: Path(f"{i}.jpg"))
    first = next(out)
    assert first[0] == 3 and read == [0, 1, 2, 3]  # one window read, nothing more yet
    results = dict([first, *out])
    assert calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and here == [4, 6, 7]
    assert sorted(results) == list(range(10))
    for i, r in results.items():
        if i in here:
            assert isinstance(r, PhotoError)
        else:
            assert r.tolist() == [float(i)] * 2

    # a job that fails before the cluster ever gave a result: the cluster is the problem
    fresh = RayFeaturePool("efficientnet-lite0", "local")
    fresh._ray = FakeRay

    def fail(window, path_of):
        raise FakeRay.exceptions.RayError("cannot import groundsearch")
        yield  # a generator, like _run

    monkeypatch.setattr(fresh, "_run", fail)
    with pytest.raises(RayClusterError, match="cannot import groundsearch"):
        list(fresh.map(range(3), lambda i: Path(f"{i}.jpg")))
