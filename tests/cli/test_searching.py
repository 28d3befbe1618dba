"""``groundsearch search`` and ``groundsearch describe``: the service's answers from a
gallery on disk (no server), the same through ``--url``, the filters, clear errors, and
a search while ``groundsearch index`` writes the gallery."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from groundsearch.cli import main
from groundsearch.common.settings import get_settings
from groundsearch.service.http.app import create_app
from tests.service.real_server import Server, free_port, server_env, stop
from tests.tiny_data import FLICKR

QUERY = "A dog runs on the beach ."


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The commands' cache (parses) in a temp folder, with the shared GloVe pretrain."""
    cache = tmp_path_factory.getbasetemp() / "search-cli-cache"
    if not cache.exists():
        from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

        cache.mkdir()
        (cache / "glove6b50d.pretrain.pt").symlink_to(ensure_pretrain(get_settings().cache_dir))
    monkeypatch.setenv("GROUNDSEARCH_CACHE_DIR", str(cache))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def without(answer: dict, *keys: str) -> dict:
    """An answer without ``keys`` in it or its hits (what differs between two runs)."""
    out = {k: v for k, v in answer.items() if k not in keys}
    for name in ("results", "weak"):
        out[name] = [{k: v for k, v in h.items() if k not in keys} for h in answer[name]]
    return out


# --- on a gallery on disk -----------------------------------------------------------------------


def test_search_prints_the_paths_of_the_best_photos(service_gallery: Path, capsys):
    status, out, err = run(
        capsys, "search", QUERY, "--index", str(service_gallery), "-k", "3", "--min-relevance", "0"
    )
    assert status == 0, err
    paths = out.splitlines()
    assert len(paths) == 3 and len(set(paths)) == 3
    assert all(Path(p).is_file() and Path(p).parent.name == "Images" for p in paths)
    assert err == ""  # nothing left out at min_relevance 0


def test_search_answers_what_the_service_answers(service_gallery: Path, service_components, capsys):
    args = ["--index", str(service_gallery), "-k", "3", "--json"]
    status, out, err = run(capsys, "search", QUERY, *args)
    assert status == 0, err
    mine = json.loads(out)
    with TestClient(create_app(service_components.settings, service_components)) as client:
        served = client.post("/search", params={"text": QUERY, "k": 3}).json()
    assert without(mine, "path", "timings_ms") == without(served, "timings_ms")
    for hit in mine["results"] + mine["weak"]:
        assert hit["path"] == str(Path(hit["folder"]) / hit["file"])
    # the next page, through the cursor, as the service serves it
    status, out, _ = run(capsys, "search", QUERY, *args, "--cursor", mine["next"])
    with TestClient(create_app(service_components.settings, service_components)) as client:
        params = {"text": QUERY, "k": 3, "cursor": mine["next"]}
        served = client.post("/search", params=params).json()
    assert without(json.loads(out), "path", "timings_ms") == without(served, "timings_ms")


def test_search_takes_the_filters_and_order(service_gallery: Path, capsys, monkeypatch):
    g = ["--index", str(service_gallery), "--min-relevance", "0", "--json"]
    status, out, _ = run(capsys, "search", QUERY, *g, "-k", "20")
    everything = json.loads(out)
    assert status == 0 and len(everything["results"]) == 8  # the gallery's 8 photos
    folder = everything["results"][0]["folder"]
    status, out, _ = run(capsys, "search", QUERY, *g, "--folder", folder, "--order", "-date")
    newest = json.loads(out)
    assert newest["order"] == "-date" and len(newest["results"]) == 8
    taken = [h["taken"] for h in newest["results"]]
    assert None not in taken and taken == sorted(taken, reverse=True)

    status, out, err = run(
        capsys, "search", QUERY, "--index", str(service_gallery), "--source", "upload"
    )
    assert status == 0 and out == "" and "no photo passes the filters" in err
    status, out, err = run(
        capsys, "search", QUERY, "--index", str(service_gallery), "--folder", folder + "x"
    )
    assert status == 0 and out == "" and "no photo passes" in err
    monkeypatch.chdir(folder)  # --folder relative to the current folder
    status, out, _ = run(capsys, "search", QUERY, *g, "--folder", ".")
    assert status == 0 and len(json.loads(out)["results"]) == 8
    status, out, _ = run(capsys, "search", QUERY, *g, "--folder", "../elsewhere")
    assert status == 0 and json.loads(out)["results"] == []
    status, out, err = run(
        capsys, "search", QUERY, "--index", str(service_gallery), "--near", "0,0"
    )
    assert status == 0 and out == ""  # Flickr8k's photos have no GPS


def test_every_declared_filter_is_a_flag(capsys):
    from groundsearch.index.filters.conditions import FILTER_PARAMS

    with pytest.raises(SystemExit):
        main(["search", "--help"])
    help = capsys.readouterr().out
    for param in FILTER_PARAMS:
        assert "--" + param.name.replace("_", "-") in help, param.name
    assert "{folder,upload}" in help


def test_values_that_start_with_a_dash_are_read_as_values(service_gallery: Path, capsys):
    g = ["--index", str(service_gallery), "--json", "--min-relevance", "0"]
    status, out, err = run(
        capsys, "search", QUERY, *g, "--order", "-date", "--near", "-33.86,151.2"
    )
    assert status == 0, err
    answer = json.loads(out)
    assert answer["order"] == "-date" and answer["results"] == []  # Sydney: no photo there


def test_weak_hits_are_left_out_and_said_so(service_gallery: Path, capsys):
    status, out, err = run(capsys, "search", "a giraffe", "--index", str(service_gallery))
    assert status == 0 and out == ""
    assert 'no good match for "a giraffe"' in err and "--min-relevance 0" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--near", "100,0"], "--near: near: the latitude must lie in [-90, 90]"),
        (["--within-km", "5"], "--within-km: within_km needs near"),
        (["--near", "48.8,2.3", "--within-km", "-1"], "--within-km: within_km must be above 0"),
        (["--after", "yesterday"], "--after: after must be an ISO 8601 date"),
        (["--after", "2024-06-01", "--before", "2024-01-01"], "--before: before must be later"),
        (["--camera", " "], "--camera: camera must not be empty"),
    ],
)
def test_bad_filter_values_are_refused_naming_the_flag(service_gallery, capsys, args, message):
    status, out, err = run(capsys, "search", QUERY, "--index", str(service_gallery), *args)
    assert status == 2 and out == ""
    assert err.startswith("groundsearch search: error: ") and message in err


def test_unusable_texts_missing_galleries_and_bad_cursors_are_clear_errors(
    service_gallery: Path, tmp_path: Path, capsys
):
    status, _, err = run(capsys, "search", "!!! ...", "--index", str(service_gallery))
    assert status == 2 and "text has no word the model knows" in err
    status, _, err = run(capsys, "search", "a" * 501, "--index", str(service_gallery))
    assert status == 2 and "text is 501 characters" in err
    status, _, err = run(capsys, "search", QUERY, "--index", str(tmp_path / "none"))
    assert status == 2 and f"no gallery at {tmp_path / 'none'}" in err
    assert "groundsearch index" in err
    status, _, err = run(
        capsys, "search", QUERY, "--index", str(service_gallery), "--cursor", "not-a-cursor"
    )
    assert status == 2 and "--cursor: the cursor is malformed" in err
    status, _, err = run(capsys, "search", QUERY, "--url", f"http://127.0.0.1:{free_port()}")
    assert status == 2 and "no answer from http://127.0.0.1:" in err
    with pytest.raises(SystemExit) as both:  # argparse: one or the other
        main(["search", QUERY, "--index", str(service_gallery), "--url", "http://x"])
    assert both.value.code == 2


def test_describe_prints_a_sentence_what_it_saw_and_captions(service_gallery: Path, capsys):
    name = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[20]  # not in the gallery
    photo = FLICKR / "Images" / name
    status, out, err = run(
        capsys, "describe", str(photo), "--index", str(service_gallery), "--min-relevance", "0"
    )
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].endswith(".") and len(lines[0].split()) >= 4  # the written sentence
    captions = [line for line in lines[1:] if not line.startswith("saw: ")]
    assert len(captions) == 5 and all("(/" in line for line in captions)  # the photo's path
    status, out, _ = run(
        capsys, "describe", str(photo), "--index", str(service_gallery), "--json", "-k", "2"
    )
    answer = json.loads(out)
    assert set(answer) >= {"generated", "results", "weak", "concepts", "no_match"}
    assert len(answer["results"] + answer["weak"]) == 2
    assert all(Path(h["path"]).is_file() for h in answer["results"] + answer["weak"])


def test_describe_draws_from_a_caption_bank_when_named(
    service_gallery: Path, tmp_path: Path, capsys
):
    bank = tmp_path / "bank.tsv"
    bank.write_text("a.jpg\tA dog runs through the grass .\nb.jpg\tTwo girls smile .\n")
    name = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[20]
    args = ["--index", str(service_gallery), "--bank", str(bank), "--json", "-k", "50"]
    status, out, err = run(capsys, "describe", str(FLICKR / "Images" / name), *args)
    assert status == 0, err
    answer = json.loads(out)
    banked = [h for h in answer["results"] + answer["weak"] if h["source"] == "bank"]
    assert sorted(h["text"] for h in banked) == [
        "A dog runs through the grass .",
        "Two girls smile .",
    ]
    assert all(h["path"] is None and h["image_id"] is None for h in banked)


def test_describe_refuses_what_is_not_a_photo(service_gallery: Path, tmp_path: Path, capsys):
    notes = tmp_path / "notes.jpg"
    notes.write_text("not a photo")
    status, _, err = run(capsys, "describe", str(notes), "--index", str(service_gallery))
    assert status == 2 and "not an image" in err
    status, _, err = run(capsys, "describe", str(tmp_path / "gone.jpg"))
    assert status == 2 and "no photo at" in err


# --- in a process of its own, and through a server -----------------------------------------------


@pytest.mark.slow
def test_the_command_and_the_server_give_the_same_answer(
    service_gallery: Path, tmp_path: Path, cli
):
    local = cli("search", QUERY, "--index", str(service_gallery), "-k", "4", "--json")
    assert local.returncode == 0, local.stderr
    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    (tmp_path / "cache").mkdir()
    server = Server(
        gallery,
        server_env(tmp_path / "cache", "cli-search-token-0123456789"),
        tmp_path / "server.log",
    )
    server.start()
    try:
        server.ready()
        remote = cli("search", QUERY, "--url", server.base, "-k", "4", "--json")
        paths = cli("search", QUERY, "--url", server.base, "-k", "4", "--min-relevance", "0")
        answer = json.loads(local.stdout)
        first = (answer["results"] + answer["weak"])[0]["file"]
        said = cli("describe", str(FLICKR / "Images" / first), "--url", server.base, "--json")
        bad = cli("search", QUERY, "--url", server.base, "--within-km", "3", "--near", "91,0")
        unusable = cli("search", "!!!", "--url", server.base)
    finally:
        server.kill()
    assert remote.returncode == 0, remote.stderr
    assert without(json.loads(remote.stdout), "timings_ms") == without(
        json.loads(local.stdout), "timings_ms"
    )
    assert len(paths.stdout.splitlines()) == 4
    assert said.returncode == 0 and json.loads(said.stdout)["generated"]
    assert bad.returncode == 2 and "--near" in bad.stderr  # checked here, before asking
    assert unusable.returncode == 2 and "no word the model knows" in unusable.stderr


@pytest.mark.slow
def test_a_search_reads_the_gallery_while_an_indexer_writes_it(tmp_path: Path, cli):
    """``groundsearch search`` opens the gallery as a replica does: it answers from what
    the indexer has committed, and the indexer is not held up."""
    names = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[:40]
    photos = tmp_path / "photos"
    photos.mkdir()
    for name in names:
        (photos / name).symlink_to(FLICKR / "Images" / name)
    gallery = tmp_path / "gallery"
    env = {**os.environ, "GROUNDSEARCH_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    (tmp_path / "cache").mkdir()
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    (tmp_path / "cache" / "glove6b50d.pretrain.pt").symlink_to(
        ensure_pretrain(get_settings().cache_dir)
    )
    log = open(tmp_path / "index.log", "w")  # noqa: SIM115
    indexer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groundsearch.cli",
            "index",
            str(photos),
            "--index",
            str(gallery),
            "--workers",
            "1",
            "--quiet",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    answers = []
    try:
        deadline = time.monotonic() + 300
        while not (gallery / "gallery.db").exists() and indexer.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0)  # past its creation (the search reads a gallery, not a half-made one)
        while indexer.poll() is None and time.monotonic() < deadline:
            args = ["--index", str(gallery), "--min-relevance", "0", "-k", "50"]
            answers.append(cli("search", QUERY, *args))
        indexer.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        stop(indexer, signal.SIGKILL)
        log.close()
    assert indexer.returncode == 0, (tmp_path / "index.log").read_text()[-2000:]
    assert answers, "the indexer ended before a search could run"
    seen = set()
    for res in answers:
        assert res.returncode in (0,), res.stderr
        printed = res.stdout.splitlines()
        assert all(Path(p).name in names for p in printed)
        seen.add(len(printed))
    final = cli("search", QUERY, "--index", str(gallery), "--min-relevance", "0", "-k", "50")
    assert len(final.stdout.splitlines()) == len(names)
    assert max(seen) <= len(names)
