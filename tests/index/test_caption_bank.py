"""``/describe`` on a gallery without captions: sentences from the caption bank, embedded
once and cached; ``/ready`` names the bank."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from groundsearch.common.settings import get_settings
from groundsearch.index.caption_bank import BANK_DIR, CaptionBank
from groundsearch.index.ingest.indexer import index_photos
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.app import create_app
from tests.tiny_data import make_tiny_flickr


@pytest.fixture(scope="module")
def photos_and_bank(tmp_path_factory, parser):
    """8 Flickr8k photos indexed without captions; their 40 captions as a bank file."""
    root = make_tiny_flickr(tmp_path_factory.mktemp("bank-data"), train=0, dev=0, test=8)
    gallery = tmp_path_factory.mktemp("bank-gallery") / "g"
    index_photos([root / "Images"], gallery, get_settings().default_checkpoint, parser, workers=0)
    captions: dict[str, list[str]] = {}
    for line in (root / "Flickr8k.token.txt").read_text().splitlines():
        key, text = line.split("\t")
        captions.setdefault(key.split("#")[0], []).append(text)
    bank = tmp_path_factory.mktemp("bank") / "bank.tsv"
    bank.write_text("".join(f"{k}\t{t}\n" for k, ts in captions.items() for t in ts))
    return root, gallery, bank, captions


def test_describe_draws_from_the_bank_when_the_gallery_has_no_captions(photos_and_bank, parser):
    root, gallery, bank, captions = photos_and_bank
    settings = ServiceSettings(
        index_dir=gallery, cache_dir=parser.cache_dir, parse_workers=0, caption_bank=str(bank)
    )
    components = Components.load(settings, parser=parser)
    try:
        deadline = time.monotonic() + 120
        while components.bank.bank is None and time.monotonic() < deadline:
            assert not components.bank.status.startswith("failed"), components.bank.status
            time.sleep(0.2)
        with TestClient(create_app(settings, components)) as client:
            ready = client.get("/ready").json()
            assert ready["captions"] == 0 and ready["caption_bank"] == "bank.tsv (40 captions)"
            hits_at_5 = 0
            for name, own in captions.items():
                with open(root / "Images" / name, "rb") as fh:
                    res = client.post(
                        "/describe",
                        params={"k": 5, "min_relevance": 0},
                        files={"image": (name, fh)},
                    )
                assert res.status_code == 200, res.text
                results = res.json()["results"]
                assert len(results) == 5 and {r["source"] for r in results} == {"bank"}
                assert all(r["image_id"] is None and r["image_url"] is None for r in results)
                hits_at_5 += any(r["text"] in own for r in results)
            assert hits_at_5 >= 6  # of 8 photos (chance: 5 of 40 captions are its own)
    finally:
        components.close()


def test_a_bank_is_embedded_once_then_loaded(tmp_path, parser):
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    texts = ["A dog runs on the grass .", "Two children play in the snow .", "qzxv wpqk"]
    identity = {"checkpoint_sha256": "f" * 64}
    bank = CaptionBank.load_or_build("t", texts, model, parser, identity, tmp_path)
    assert len(bank) == 2  # the sentence with no known word is left out
    assert len(list((tmp_path / BANK_DIR).glob("*.npz"))) == 1

    class NoParsing:
        def parse(self, *args, **kwargs):
            raise AssertionError("a cached bank is not parsed again")

    again = CaptionBank.load_or_build("t", texts, model, NoParsing(), identity, tmp_path)  # type: ignore[arg-type]
    assert again.texts == bank.texts
    assert again.search(model.embed_sentences(parser.parse([texts[1]]))[0], 1)[0][0] == texts[1]


def test_the_default_bank_holds_the_captions_of_both_collections(tmp_path):
    from groundsearch.common.settings import get_settings
    from groundsearch.index.caption_bank import training_captions
    from groundsearch.index.ingest.sample_gallery import SAMPLE_CAPTIONS

    data = get_settings().data_dir
    texts, name = training_captions(data, SAMPLE_CAPTIONS)
    assert name == "flickr8k train+dev + cc-web train+dev"
    assert len(texts) == 7000 * 5 + 16645 + 1000
    web = (data / "cc-web" / "captions.tsv").read_text(encoding="utf-8").splitlines()
    assert web[0].split("\t", 1)[1] in texts  # the web's alt-texts, for /describe
    (tmp_path / "flickr8k").mkdir()  # a data folder without them: the sample's captions
    assert training_captions(tmp_path, SAMPLE_CAPTIONS)[1] == "sample captions"
