"""Run a TensorFlow.js graph model (``model.json`` + weight shards) with torch.

A frozen TensorFlow GraphDef as JSON, its constants in binary shards (float32 weights
may be stored as float16). The part of the graph an output needs is evaluated in NHWC,
for a convolutional network's ops (``evaluate``); another op is a ``GraphError`` naming
it. Intermediate tensors are freed after their last use.

    graph = TfjsGraph.load(folder, "centernet")
    heatmap = graph.run({"tower_0/images": x}, "tower_0/keypoints")   # x: N × H × W × 3
"""

from __future__ import annotations

import base64
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

Node = Mapping[str, Any]


class GraphError(ValueError):
    """A graph model that cannot be read or run (missing files, an unknown op)."""


def attr(node: Node, key: str, default: Any = None) -> Any:
    """A node attribute as Python: strings decoded, lists of ints or strings as lists."""
    v = node.get("attr", {}).get(key)
    if v is None:
        return default
    if "s" in v:
        return base64.b64decode(v["s"]).decode()
    for kind, cast in (("b", bool), ("i", int), ("f", float)):
        if kind in v:
            return cast(v[kind])
    if "list" in v:
        items = v["list"]
        if "s" in items:
            return [base64.b64decode(s).decode() for s in items["s"]]
        return [int(i) for i in items.get("i", [])]
    return v


def read_weights(manifest: list[Mapping[str, Any]], folder: Path) -> dict[str, torch.Tensor]:
    """The graph's constants by name from its shards (float16-quantised weights as float32)."""
    out: dict[str, torch.Tensor] = {}
    for group in manifest:
        buf = b"".join((folder / p).read_bytes() for p in group["paths"])
        offset = 0
        for w in group["weights"]:
            n = int(np.prod(w["shape"])) if w["shape"] else 1
            quant = (w.get("quantization") or {}).get("dtype")
            stored = str(quant or w["dtype"])
            dtype = {"float16": np.float16, "float32": np.float32, "int32": np.int32}.get(stored)
            if dtype is None or (quant is not None and w["dtype"] != "float32"):
                raise GraphError(f"weight {w['name']}: unsupported type {w['dtype']}/{quant}")
            if offset + n * np.dtype(dtype).itemsize > len(buf):
                raise GraphError(f"{group['paths']}: {len(buf)} bytes, short of {w['name']}")
            a = np.frombuffer(buf, dtype, n, offset)
            offset += a.nbytes
            a = a.astype(np.float32) if dtype == np.float16 else a.copy()
            out[w["name"]] = torch.from_numpy(a.reshape(w["shape"]))
        if offset != len(buf):
            raise GraphError(f"{group['paths']}: {len(buf)} bytes, the manifest reads {offset}")
    return out


def _same_padding(
    x: torch.Tensor, kernel: tuple[int, int], stride: list[int], dilation: list[int]
) -> torch.Tensor:
    """Pad an NCHW tensor as TensorFlow's SAME does (the odd pixel after)."""
    pads: list[int] = []
    for i in (1, 0):  # the width's first, as F.pad reads them
        n, k, s, d = x.shape[i + 2], kernel[i], stride[i], dilation[i]
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads)


def conv(x: torch.Tensor, w: torch.Tensor, node: Node, depthwise: bool) -> torch.Tensor:
    """A TensorFlow (depthwise) 2-D convolution of an NHWC tensor, HWIO (HWCM) weights."""
    stride = attr(node, "strides", [1, 1, 1, 1])[1:3]
    dilation = (attr(node, "dilations") or [1, 1, 1, 1])[1:3]
    kh, kw = int(w.shape[0]), int(w.shape[1])
    if depthwise:
        c, m = int(w.shape[2]), int(w.shape[3])
        weight, groups = w.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw), c
    else:
        weight, groups = w.permute(3, 2, 0, 1), 1
    y = x.permute(0, 3, 1, 2)
    if attr(node, "padding") == "SAME":
        y = _same_padding(y, (kh, kw), stride, dilation)
    elif attr(node, "padding") != "VALID":
        raise GraphError(f"{node['name']}: padding {attr(node, 'padding')!r}")
    y = F.conv2d(y, weight, stride=stride, dilation=dilation, groups=groups)
    return y.permute(0, 2, 3, 1)


def resize_bilinear(x: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """TensorFlow's legacy bilinear resize (no half-pixel centres, no corner alignment)
    of an NHWC tensor: output pixel i reads input position i · in/out."""
    h, w = (int(v) for v in size.reshape(-1))

    def taps(n_in: int, n_out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        src = torch.arange(n_out, dtype=torch.float32) * (n_in / n_out)
        lo = src.floor().long().clamp(max=n_in - 1)
        return lo, (lo + 1).clamp(max=n_in - 1), src - lo

    y0, y1, fy = taps(x.shape[1], h)
    x0, x1, fx = taps(x.shape[2], w)
    fx = fx[:, None]
    top = x[:, y0][:, :, x0] * (1 - fx) + x[:, y0][:, :, x1] * fx
    bottom = x[:, y1][:, :, x0] * (1 - fx) + x[:, y1][:, :, x1] * fx
    fy = fy[:, None, None]
    return top * (1 - fy) + bottom * fy


_CONVS = ("_FusedConv2D", "FusedDepthwiseConv2dNative", "Conv2D", "DepthwiseConv2dNative")
_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Add": torch.add,
    "AddV2": torch.add,
    "Mul": torch.mul,
    "Sub": torch.sub,
}
_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Relu": F.relu,
    "Relu6": F.relu6,
    "Sigmoid": torch.sigmoid,
    "Identity": lambda t: t,
}


def evaluate(node: Node, a: list[torch.Tensor]) -> torch.Tensor:
    """One node's output from its inputs' values."""
    op = node["op"]
    if op in _CONVS:
        y = conv(a[0], a[1], node, "Depthwise" in op)
        for fused in attr(node, "fused_ops") or []:
            if fused == "BiasAdd":
                y = y + a[2]
            elif fused in ("Relu", "Relu6"):
                y = _UNARY[fused](y)
            else:
                raise GraphError(f"{node['name']}: fused op {fused}")
        return y
    if op in _BINARY:
        return _BINARY[op](a[0], a[1])
    if op in _UNARY:
        return _UNARY[op](a[0])
    if op == "Mean":
        dims = [int(i) for i in a[1].reshape(-1)]
        return a[0].mean(dim=dims, keepdim=bool(attr(node, "keep_dims", False)))
    if op == "ConcatV2":
        return torch.cat(a[:-1], dim=int(a[-1]))
    if op == "ResizeBilinear":
        if attr(node, "align_corners") or attr(node, "half_pixel_centers"):
            raise GraphError(f"{node['name']}: only the legacy bilinear resize is supported")
        return resize_bilinear(a[0], a[1])
    raise GraphError(f"{node['name']}: op {op} is not supported")


class TfjsGraph:
    """A graph model's nodes and constants, evaluated on demand (``run``)."""

    def __init__(self, nodes: Mapping[str, Node], constants: Mapping[str, torch.Tensor]) -> None:
        self.nodes, self.constants = nodes, constants

    @classmethod
    def load(cls, folder: Path, name: str) -> TfjsGraph:
        """``folder/name.json`` and the shards it names; GraphError if unreadable."""
        path = Path(folder) / f"{name}.json"
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
            nodes = {n["name"]: n for n in spec["modelTopology"]["node"]}
            constants = read_weights(spec["weightsManifest"], path.parent)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, GraphError):
                raise
            raise GraphError(f"cannot read the graph model {path}: {exc}") from None
        return cls(nodes, constants)

    def _order(self, feeds: Mapping[str, Any], output: str) -> list[str]:
        """The nodes ``output`` needs, each after its inputs (iterative depth-first)."""
        order: list[str] = []
        seen = set(feeds)
        stack: list[tuple[str, bool]] = [(output, False)]
        while stack:
            name, ready = stack.pop()
            if ready:
                order.append(name)
                continue
            if name in seen:
                continue
            if name not in self.nodes:
                raise GraphError(f"the graph has no node {name!r}")
            seen.add(name)
            stack.append((name, True))
            stack += [(i, False) for i in _inputs(self.nodes[name])]
        return order

    @torch.inference_mode()
    def run(self, feeds: Mapping[str, torch.Tensor], output: str) -> torch.Tensor:
        """The value of node ``output`` for the given placeholder values."""
        order = self._order(feeds, output)
        uses = Counter(i for name in order for i in _inputs(self.nodes[name]))
        values: dict[str, torch.Tensor] = dict(feeds)
        for name in order:
            node = self.nodes[name]
            inputs = _inputs(node)
            if node["op"] == "Const":
                values[name] = self.constants[name]
                continue
            values[name] = evaluate(node, [values[i] for i in inputs])
            for i in inputs:
                uses[i] -= 1
                if uses[i] == 0 and i != output:
                    values.pop(i, None)
        return values[output]


def _inputs(node: Node) -> list[str]:
    """A node's data inputs by node name (control inputs and output indices dropped)."""
    return [i.partition(":")[0] for i in node.get("input", []) if not i.startswith("^")]
