"""Import torchvision on a CPU-only torch: PyPI's torchvision 0.28.0 (a CUDA build) needs
its ``nms`` and ``qnms`` schemas declared first (then models and transforms work, not
``io``/``ops``). Import it only through :func:`import_torchvision`."""

from __future__ import annotations

import importlib
from types import ModuleType

_library = None


def import_torchvision() -> ModuleType:
    """``torchvision``, with the operator schemas declared first if needed."""
    global _library
    try:
        return importlib.import_module("torchvision")
    except (RuntimeError, ImportError):
        pass
    import torch

    if _library is None:
        _library = torch.library.Library("torchvision", "DEF")
        _library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import sys

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    return importlib.import_module("torchvision")


def transforms() -> ModuleType:
    """``torchvision.transforms``."""
    import_torchvision()
    return importlib.import_module("torchvision.transforms")
