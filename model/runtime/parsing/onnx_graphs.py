"""The parse's heaviest products run by ONNX Runtime: the highway BiLSTM stacks and the
relation scorer's bilinear form.

For a short sentence PyTorch's CPU kernels are slow where ONNX Runtime's are not: a
10-word sentence through one 200-unit BiLSTM layer takes about 1.2 ms in PyTorch
(oneDNN) and 0.35 ms in ONNX Runtime's LSTM kernel, the relation scorer's (11 × 201) ·
(201 × 10,251) product 1.9 ms against 0.95 — same weights, same results to within 1e-6
(docs/BENCHMARKS.md). So these are rebuilt here as ONNX graphs from the loaded modules'
own weights when the parser loads (nothing is exported to disk); the rest of the
networks stays in torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

#: The ONNX opset the graphs are written in.
OPSET = 17


def _session(graph: Any) -> ort.InferenceSession:
    """A session on one thread: a parser runs in a process of its own per core (for a
    query's small products a second thread costs more than it saves)."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


class OnnxProduct:
    """``x @ weight`` for a fixed (in, out) matrix and any (rows, in) ``x``."""

    def __init__(self, weight: torch.Tensor) -> None:
        w = weight.detach().float().contiguous().numpy()
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            "product",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", w.shape[0]])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", w.shape[1]])],
            [numpy_helper.from_array(w, "w")],
        )
        self.session = _session(graph)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, in) → (rows, out)."""
        return torch.from_numpy(self.session.run(None, {"x": x.detach().float().numpy()})[0])


def _onnx_gates(weight: torch.Tensor) -> np.ndarray:
    """PyTorch's gate order (input, forget, cell, output) → ONNX's (input, output,
    forget, cell)."""
    i, f, g, o = weight.detach().float().chunk(4, 0)
    return torch.cat([i, o, f, g], 0).numpy()


def _layer_nodes(hlstm: Any, layer: int, x: str) -> tuple[list[Any], list[Any], str]:
    """One highway layer: ``h + sigmoid(gate(x)) * tanh(highway(x))`` with ``h`` the
    layer's BiLSTM over ``x`` (batch, length, input)."""
    lstm = hlstm.lstm[layer].lstm
    hidden = lstm.hidden_size
    p = f"l{layer}_"
    weights = {
        p + "W": np.stack([_onnx_gates(lstm.weight_ih_l0), _onnx_gates(lstm.weight_ih_l0_reverse)]),
        p + "R": np.stack([_onnx_gates(lstm.weight_hh_l0), _onnx_gates(lstm.weight_hh_l0_reverse)]),
        p + "B": np.stack(
            [
                np.concatenate([_onnx_gates(lstm.bias_ih_l0), _onnx_gates(lstm.bias_hh_l0)]),
                np.concatenate(
                    [_onnx_gates(lstm.bias_ih_l0_reverse), _onnx_gates(lstm.bias_hh_l0_reverse)]
                ),
            ]
        ),
        p + "gate_W": hlstm.gate[layer].weight.detach().float().T.contiguous().numpy(),
        p + "gate_b": hlstm.gate[layer].bias.detach().float().numpy(),
        p + "hw_W": hlstm.highway[layer].weight.detach().float().T.contiguous().numpy(),
        p + "hw_b": hlstm.highway[layer].bias.detach().float().numpy(),
        p + "shape": np.array([0, 0, 2 * hidden], dtype=np.int64),
    }
    node = helper.make_node
    nodes = [
        node("Transpose", [x], [p + "xt"], perm=[1, 0, 2]),  # (length, batch, input)
        node(
            "LSTM",
            [p + "xt", p + "W", p + "R", p + "B", "", p + "h0", p + "c0"],
            [p + "y"],
            direction="bidirectional",
            hidden_size=hidden,
        ),
        node("Transpose", [p + "y"], [p + "yt"], perm=[2, 0, 1, 3]),  # (batch, length, 2, H)
        node("Reshape", [p + "yt", p + "shape"], [p + "h"]),
        node("MatMul", [x, p + "gate_W"], [p + "g0"]),
        node("Add", [p + "g0", p + "gate_b"], [p + "g1"]),
        node("Sigmoid", [p + "g1"], [p + "g"]),
        node("MatMul", [x, p + "hw_W"], [p + "w0"]),
        node("Add", [p + "w0", p + "hw_b"], [p + "w1"]),
        node("Tanh", [p + "w1"], [p + "w"]),
        node("Mul", [p + "g", p + "w"], [p + "gw"]),
        node("Add", [p + "h", p + "gw"], [p + "out"]),
    ]
    initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    return nodes, initializers, p + "out"


class OnnxHighwayLSTM:
    """A stanza ``HighwayLSTM`` (its trained weights) as one ONNX Runtime session.

    Args:
        hlstm: the module (``model.taggerlstm`` or ``model.parserlstm``).
        h_init, c_init: the network's learnt initial states (2 × layers, 1, hidden).
    """

    def __init__(self, hlstm: Any, h_init: torch.Tensor, c_init: torch.Tensor) -> None:
        self.layers = hlstm.num_layers
        self.h_init = h_init.detach().float().numpy()
        self.c_init = c_init.detach().float().numpy()
        hidden = hlstm.lstm[0].lstm.hidden_size
        nodes, initializers, inputs, x = [], [], [], "x"
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", None]))
        for layer in range(self.layers):
            for state in ("h0", "c0"):
                inputs.append(
                    helper.make_tensor_value_info(
                        f"l{layer}_{state}", TensorProto.FLOAT, [2, "B", hidden]
                    )
                )
            more, weights, x = _layer_nodes(hlstm, layer, x)
            nodes += more
            initializers += weights
        output = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "T", 2 * hidden])
        graph = helper.make_graph(nodes, "highway_lstm", inputs, [output], initializers)
        self.session = _session(graph)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, input) → (batch, length, 2 × hidden)."""
        batch = x.size(0)
        feed: dict[str, np.ndarray] = {"x": x.detach().float().numpy()}
        for layer in range(self.layers):
            rows = slice(2 * layer, 2 * layer + 2)
            feed[f"l{layer}_h0"] = np.ascontiguousarray(
                np.broadcast_to(self.h_init[rows], (2, batch, self.h_init.shape[-1]))
            )
            feed[f"l{layer}_c0"] = np.ascontiguousarray(
                np.broadcast_to(self.c_init[rows], (2, batch, self.c_init.shape[-1]))
            )
        return torch.from_numpy(self.session.run(None, feed)[0])
