"""The TensorFlow.js graph runner (model/runtime/objects/graph.py) against TensorFlow's
definitions, written out as loops: SAME padding with its odd pixel after, depthwise
weights, fused ops, float16 shards and the legacy bilinear resize."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.objects.graph import GraphError, TfjsGraph

RNG = np.random.default_rng(0)


def _s(text: str) -> dict[str, str]:
    return {"s": base64.b64encode(text.encode()).decode()}


def _ints(*values: int) -> dict[str, dict[str, list[str]]]:
    return {"list": {"i": [str(v) for v in values]}}


def _conv_attrs(stride: int, padding: str, fused: tuple[str, ...] = ()) -> dict[str, object]:
    a: dict[str, object] = {"strides": _ints(1, stride, stride, 1), "padding": _s(padding)}
    if fused:
        a["fused_ops"] = {"list": {"s": [base64.b64encode(f.encode()).decode() for f in fused]}}
    return a


def _write(folder: Path, nodes: list[dict], weights: dict[str, np.ndarray], half: set[str]) -> None:
    """A graph model: nodes, and the weights in one shard (those in ``half`` as float16)."""
    manifest, blobs = [], []
    for name, value in weights.items():
        entry: dict[str, object] = {"name": name, "shape": list(value.shape)}
        if value.dtype == np.int32:
            entry["dtype"] = "int32"
            blobs.append(value.tobytes())
        else:
            entry["dtype"] = "float32"
            if name in half:
                entry["quantization"] = {"dtype": "float16", "original_dtype": "float32"}
                blobs.append(value.astype(np.float16).tobytes())
            else:
                blobs.append(value.astype(np.float32).tobytes())
        manifest.append(entry)
    consts = [{"name": n, "op": "Const"} for n in weights]
    spec = {
        "format": "graph-model",
        "modelTopology": {"node": consts + nodes},
        "weightsManifest": [{"paths": ["g.bin"], "weights": manifest}],
    }
    (folder / "g.json").write_text(json.dumps(spec))
    (folder / "g.bin").write_bytes(b"".join(blobs))


def _pad_same(x: np.ndarray, k: int, s: int) -> np.ndarray:
    """TensorFlow's SAME: out = ceil(n / s); the odd padding pixel goes after."""
    pads = []
    for n in x.shape[1:3]:
        total = max((-(-n // s) - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
    return np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))


def _conv_ref(x: np.ndarray, w: np.ndarray, s: int, depthwise: bool = False) -> np.ndarray:
    k = w.shape[0]
    x = _pad_same(x, k, s)
    oh, ow = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
    cout = w.shape[2] * w.shape[3] if depthwise else w.shape[3]
    y = np.zeros((x.shape[0], oh, ow, cout))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * s : i * s + k, j * s : j * s + k, :]
            if depthwise:  # channel c, multiplier m -> output c * M + m
                y[:, i, j] = np.einsum("nhwc,hwcm->ncm", patch, w).reshape(x.shape[0], -1)
            else:
                y[:, i, j] = np.einsum("nhwc,hwco->no", patch, w)
    return y


def _resize_ref(x: np.ndarray, h: int, w: int) -> np.ndarray:
    """Legacy bilinear: output pixel i reads input position i · in / out."""
    n_h, n_w = x.shape[1:3]
    y = np.zeros((x.shape[0], h, w, x.shape[3]))
    for i in range(h):
        sy = i * n_h / h
        y0, fy = int(np.floor(sy)), sy - np.floor(sy)
        y1 = min(y0 + 1, n_h - 1)
        for j in range(w):
            sx = j * n_w / w
            x0, fx = int(np.floor(sx)), sx - np.floor(sx)
            x1 = min(x0 + 1, n_w - 1)
            top = x[:, y0, x0] * (1 - fx) + x[:, y0, x1] * fx
            bottom = x[:, y1, x0] * (1 - fx) + x[:, y1, x1] * fx
            y[:, i, j] = top * (1 - fy) + bottom * fy
    return y


@pytest.fixture
def graph(tmp_path: Path) -> tuple[TfjsGraph, dict[str, np.ndarray]]:
    w = {
        "w": RNG.normal(size=(3, 3, 2, 4)).astype(np.float32),
        "b": RNG.normal(size=4).astype(np.float32),
        "dw": RNG.normal(size=(3, 3, 4, 2)).astype(np.float32),
        "axes": np.array([1, 2], np.int32),
        "size": np.array([5, 7], np.int32),
        "axis": np.array(3, np.int32),
        "six": np.array(3.0, np.float32),
    }
    nodes = [
        {"name": "x", "op": "Placeholder"},
        {"name": "c", "op": "_FusedConv2D", "input": ["x", "w", "b"],
         "attr": _conv_attrs(2, "SAME", ("BiasAdd", "Relu6"))},
        {"name": "d", "op": "DepthwiseConv2dNative", "input": ["c", "dw"],
         "attr": _conv_attrs(1, "SAME")},
        {"name": "m", "op": "Mean", "input": ["d", "axes"], "attr": {"keep_dims": {"b": True}}},
        {"name": "g", "op": "Mul", "input": ["d", "m"]},
        {"name": "r", "op": "ResizeBilinear", "input": ["g", "size"],
         "attr": {"align_corners": {"b": False}, "half_pixel_centers": {"b": False}}},
        {"name": "sig", "op": "Sigmoid", "input": ["r"]},
        {"name": "out", "op": "ConcatV2", "input": ["sig", "r", "axis"]},
        {"name": "odd", "op": "Erf", "input": ["x"]},
    ]  # fmt: skip
    _write(tmp_path, nodes, w, half={"w", "dw"})
    return TfjsGraph.load(tmp_path, "g"), w


def test_a_small_network_matches_tensorflows_definitions(graph):
    g, w = graph
    x = RNG.normal(size=(2, 6, 7, 2)).astype(np.float32)  # 6 × 7, stride 2: odd padding
    w16 = {k: w[k].astype(np.float16).astype(np.float64) for k in ("w", "dw")}
    c = np.clip(_conv_ref(x.astype(np.float64), w16["w"], 2) + w["b"], 0.0, 6.0)
    assert c.shape == (2, 3, 4, 4)
    d = _conv_ref(c, w16["dw"], 1, depthwise=True)
    r = _resize_ref(d * d.mean(axis=(1, 2), keepdims=True), 5, 7)
    expected = np.concatenate([1 / (1 + np.exp(-r)), r], axis=3)
    got = g.run({"x": torch.from_numpy(x)}, "out").numpy()
    assert got.shape == (2, 5, 7, 16)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_only_what_the_output_needs_is_run_and_unknown_ops_are_named(graph):
    g, _ = graph
    x = torch.zeros(1, 6, 7, 2)
    assert g.run({"x": x}, "c").shape == (1, 3, 4, 4)  # "odd" (Erf) never evaluated
    with pytest.raises(GraphError, match="op Erf is not supported"):
        g.run({"x": x}, "odd")
    with pytest.raises(GraphError, match="no node 'nowhere'"):
        g.run({"x": x}, "nowhere")


def test_a_missing_or_short_shard_is_a_graph_error(tmp_path, graph):
    with pytest.raises(GraphError, match="cannot read the graph model"):
        TfjsGraph.load(tmp_path / "none", "g")
    shard = tmp_path / "g.bin"
    shard.write_bytes(shard.read_bytes()[:-4])
    with pytest.raises(GraphError, match="bytes"):
        TfjsGraph.load(tmp_path, "g")
