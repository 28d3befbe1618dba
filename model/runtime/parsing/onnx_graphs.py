"""The tagger's and the parser's networks after their word columns, run by ONNX Runtime
(3 × faster than PyTorch for a short sentence, docs/BENCHMARKS.md): each network, each
character model and the lemmatizer's encoder is one ONNX graph written from the loaded
modules' weights when the parser loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

#: The ONNX opset the graphs are written in.
OPSET = 17


def graph(
    nodes: list[Any], name: str, inputs: list[Any], outputs: list[Any], weights: dict[str, Any]
) -> Any:
    """An ONNX graph with ``weights`` (name → array or tensor) as its initializers."""
    arrays = [np.ascontiguousarray(torch.as_tensor(v).numpy()) for v in weights.values()]
    initializers = [numpy_helper.from_array(a, k) for a, k in zip(arrays, weights, strict=True)]
    return helper.make_graph(nodes, name, inputs, outputs, initializers)


def session(graph: Any) -> ort.InferenceSession:
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


class OnnxCharModel:
    """A stanza ``CharacterModel`` with attention as one ONNX Runtime session: words'
    character ids → one vector a word (``CharacterModel.forward`` in evaluation mode)."""

    def __init__(self, charmodel: Any) -> None:
        lstm = charmodel.charlstm.lstm
        plain = not lstm.bidirectional and lstm.num_layers == 1
        if not (plain and charmodel.attn and charmodel.char_attn.bias is None):
            raise ValueError("only a one-layer, one-direction character LSTM with attention")
        hidden = lstm.hidden_size
        weights = {
            "emb": charmodel.char_emb.weight.detach().float().numpy(),
            **_onnx_lstm(lstm, bidirectional=False),
            "attn_W": charmodel.char_attn.weight.detach().float().T.contiguous().numpy(),
            "axis1": np.array([1], dtype=np.int64),
        }
        states = (charmodel.charlstm_h_init, charmodel.charlstm_c_init)
        self.init = [state.detach().float().numpy()[:1] for state in states]
        node = helper.make_node
        nodes = [
            node("Gather", ["emb", "chars"], ["x"]),  # (words, length, emb)
            node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
            node("LSTM", ["xt", "W", "R", "B", "lengths", "h0", "c0"], ["y"], hidden_size=hidden),
            node("Squeeze", ["y", "axis1"], ["ys"]),  # (length, words, hidden)
            node("Transpose", ["ys"], ["out"], perm=[1, 0, 2]),
            node("MatMul", ["out", "attn_W"], ["a0"]),  # stanza's char_attn has no bias
            node("Sigmoid", ["a0"], ["a"]),
            node("Mul", ["out", "a"], ["weighted"]),
            node("Mul", ["weighted", "valid"], ["kept"]),
            node("ReduceSum", ["kept", "axis1"], ["pooled"], keepdims=0),
        ]
        tensor, f = helper.make_tensor_value_info, TensorProto.FLOAT
        inputs = [
            tensor("chars", TensorProto.INT64, ["N", "T"]),
            tensor("lengths", TensorProto.INT32, ["N"]),
            *(tensor(state, f, [1, "N", hidden]) for state in ("h0", "c0")),
            tensor("valid", f, ["N", "T", 1]),
        ]
        outputs = [tensor("pooled", f, ["N", hidden])]
        self.session = session(graph(nodes, "chars", inputs, outputs, weights))

    def __call__(self, ids: list[list[int]]) -> np.ndarray:
        """(words, hidden): each word's pooled character vector, from its character ids."""
        lengths = np.array([len(x) for x in ids], dtype=np.int32)
        chars = np.zeros((len(ids), int(lengths.max())), dtype=np.int64)
        for i, x in enumerate(ids):
            chars[i, : len(x)] = x
        valid = (np.arange(chars.shape[1])[None, :] < lengths[:, None])[..., None]
        feed = {"chars": chars, "lengths": lengths, "valid": valid.astype(np.float32)}
        for name, state in zip(("h0", "c0"), self.init, strict=True):
            feed[name] = np.ascontiguousarray(
                np.broadcast_to(state, (1, len(ids), state.shape[-1]))
            )
        return self.session.run(None, feed)[0]


class OnnxBiLSTM:
    """A one-layer bidirectional ``torch.nn.LSTM`` from zero states over one sequence,
    as an ONNX Runtime session (the lemmatizer's encoder)."""

    def __init__(self, lstm: Any) -> None:
        if not lstm.bidirectional or lstm.num_layers != 1:
            raise ValueError("only a one-layer bidirectional LSTM")
        tensor, f, hidden = helper.make_tensor_value_info, TensorProto.FLOAT, lstm.hidden_size
        lstm_node = helper.make_node(
            "LSTM",
            ["x", "W", "R", "B"],
            ["y", "h", "c"],
            direction="bidirectional",
            hidden_size=hidden,
        )
        inputs = [tensor("x", f, ["T", 1, lstm.input_size])]
        outputs = [tensor("y", f, ["T", 2, 1, hidden])]
        outputs += [tensor(state, f, [2, 1, hidden]) for state in ("h", "c")]
        weights = _onnx_lstm(lstm, bidirectional=True)
        self.session = session(graph([lstm_node], "bilstm", inputs, outputs, weights))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(length, input) → outputs (length, 2 × hidden: forward, backward) and the last
        states h, c (2, hidden: forward, backward)."""
        y, h, c = self.session.run(None, {"x": x.astype(np.float32, copy=False)[:, None]})
        return y[:, :, 0].reshape(len(x), -1), h[:, 0], c[:, 0]


def _onnx_gates(weight: torch.Tensor) -> np.ndarray:
    """PyTorch's gate order (input, forget, cell, output) → ONNX's (input, output, forget, cell)."""
    i, f, g, o = weight.detach().float().chunk(4, 0)
    return torch.cat([i, o, f, g], 0).numpy()


def _onnx_lstm(lstm: Any, bidirectional: bool) -> dict[str, np.ndarray]:
    """A one-layer ``torch.nn.LSTM``'s weights as ONNX's ``LSTM`` takes them: W, R and B
    (the two biases side by side), one row per direction, ONNX's gate order."""
    sides = ("_l0", "_l0_reverse") if bidirectional else ("_l0",)

    def stacked(*names: str) -> np.ndarray:
        return np.stack(
            [np.concatenate([_onnx_gates(getattr(lstm, n + s)) for n in names]) for s in sides]
        )

    return dict(W=stacked("weight_ih"), R=stacked("weight_hh"), B=stacked("bias_ih", "bias_hh"))


def _layer_nodes(hlstm: Any, layer: int, x: str) -> Head:
    """One highway layer, output ``l{layer}_out``: ``h + sigmoid(gate(x)) * tanh(highway(x))``
    with ``h`` the layer's BiLSTM over ``x`` (batch, length, input)."""
    lstm, p = hlstm.lstm[layer].lstm, f"l{layer}_"
    part = Head(weights={p + k: v for k, v in _onnx_lstm(lstm, bidirectional=True).items()})
    part.weights[p + "shape"] = np.array([0, 0, 2 * lstm.hidden_size], dtype=np.int64)
    gate = part.linear(p + "gate", x, hlstm.gate[layer].weight, hlstm.gate[layer].bias)
    highway = part.linear(p + "hw", x, hlstm.highway[layer].weight, hlstm.highway[layer].bias)
    node, inputs = helper.make_node, [p + "xt", p + "W", p + "R", p + "B", "", p + "h0", p + "c0"]
    part.nodes += [
        node("Transpose", [x], [p + "xt"], perm=[1, 0, 2]),  # (length, batch, input)
        node("LSTM", inputs, [p + "y"], direction="bidirectional", hidden_size=lstm.hidden_size),
        node("Transpose", [p + "y"], [p + "yt"], perm=[2, 0, 1, 3]),  # (batch, length, 2, H)
        node("Reshape", [p + "yt", p + "shape"], [p + "h"]),
        node("Sigmoid", [gate], [p + "g"]),
        node("Tanh", [highway], [p + "w"]),
        node("Mul", [p + "g", p + "w"], [p + "gw"]),
        node("Add", [p + "h", p + "gw"], [p + "out"]),
    ]
    return part


@dataclass
class Head:
    """What a network does with its BiLSTM stack's output ``x`` in the same session."""

    nodes: list[Any] = field(default_factory=list)
    weights: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)  # name → ONNX element type
    #: inputs that depend on the sentence length only: name → (length → array)
    by_length: dict[str, Callable[[int], np.ndarray]] = field(default_factory=dict)

    def linear(self, p: str, x: str, weight: Any, bias: Any, relu: bool = False) -> str:
        """``x @ weight.T + bias`` (then ReLU), named ``p``."""
        node, out = helper.make_node, p + "_pre" if relu else p
        self.nodes += [
            node("MatMul", [x, p + "_W"], [p + "_xw"]),
            node("Add", [p + "_xw", p + "_b"], [out]),
        ]
        self.nodes += [node("Relu", [out], [p])] if relu else []
        self.weights.update({p + "_W": weight.detach().float().T, p + "_b": bias.detach().float()})
        return p


def tagger_head(model: Any) -> Head:
    """stanza's ``Tagger`` after its stack: output ``ids`` (batch, length, classifiers),
    the upos, xpos and feats classifiers' best classes."""
    head, node = Head(outputs={"ids": TensorProto.INT64}), helper.make_node
    layers = [model.upos_clf, model.tag_clf["xpos"], *model.tag_clf["feats"]]
    hidden = head.linear("upos", "x", model.upos_hid.weight, model.upos_hid.bias, relu=True)
    weight, bias = (torch.cat([getattr(layer, k) for layer in layers]) for k in ("weight", "bias"))
    head.linear("clf", hidden, weight, bias)
    sizes = [layer.out_features for layer in layers]
    parts = [f"clf{i}" for i in range(len(sizes))]
    head.weights["clf_split"] = np.array(sizes, dtype=np.int64)
    head.nodes.append(node("Split", ["clf", "clf_split"], parts, axis=2))
    head.nodes += [node("ArgMax", [q], [q + "_id"], axis=2, keepdims=1) for q in parts]
    head.nodes.append(node("Concat", [q + "_id" for q in parts], ["ids"], axis=2))
    return head


def _sides(head: Head, p: str, scorer: Any) -> tuple[str, str]:
    """A ``DeepBiaffineScorer``'s two sides of ``x``, each with its bias column of ones."""
    node = helper.make_node
    for side, layer in (("a", scorer.W1), ("b", scorer.W2)):
        head.linear(f"{p}_{side}", "x", layer.weight, layer.bias, relu=True)
        head.nodes.append(node("Concat", [f"{p}_{side}", "ones"], [f"{p}_{side}1"], axis=2))
    return f"{p}_a1", f"{p}_b1"


def _pairwise_one(head: Head, p: str, scorer: Any) -> str:
    """A one-output ``DeepBiaffineScorer`` over all pairs: (batch, dependents, heads)."""
    a, b = _sides(head, p, scorer)
    bilinear = scorer.scorer.W_bilin
    head.weights[p + "_U"] = bilinear.weight.detach().float()[:, :, 0]
    head.weights[p + "_bias"] = bilinear.bias.detach().float()
    node = helper.make_node
    head.nodes += [
        node("MatMul", [a, p + "_U"], [p + "_aU"]),
        node("Transpose", [b], [p + "_bt"], perm=[0, 2, 1]),
        node("MatMul", [p + "_aU", p + "_bt"], [p + "_s0"]),
        node("Add", [p + "_s0", p + "_bias"], [p]),
    ]
    return p


def _offsets(length: int) -> np.ndarray:
    """offset[i, j] = j − i: a head's position from its dependent's."""
    return (np.arange(length)[None, :] - np.arange(length)[:, None]).astype(np.float32)


def parser_head(model: Any) -> Head:
    """stanza's ``GraphParser.forward_scores`` after its stack: the head log-probabilities
    ``scores`` (batch, n+1, n+1; position 0 the root) and ``relations`` (:func:`_relations`)."""
    node = helper.make_node
    head = Head(outputs={"scores": TensorProto.FLOAT, "relations": TensorProto.INT64})
    head.weights.update(one=np.ones(1, np.float32), half=np.full(1, 0.5, np.float32))
    head.weights.update(first=np.array([0]), third=np.array([2]), last=np.array([1]))
    head.nodes += [  # a (batch, length, 1) column of ones
        node("Shape", ["x"], ["x_shape"]),
        node("Slice", ["x_shape", "first", "third"], ["bt"]),
        node("Concat", ["bt", "last"], ["ones_shape"], axis=0),
        node(
            "ConstantOfShape",
            ["ones_shape"],
            ["ones"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
    ]
    scores = _pairwise_one(head, "unlabeled", model.unlabeled)
    if model.args["linearization"]:
        head.by_length["sign"] = lambda n: np.sign(_offsets(n))
        lin = _pairwise_one(head, "lin", model.linearization)
        head.nodes += [  # + logsigmoid(lin · sign(offset)) = − softplus(−lin · sign)
            node("Mul", [lin, "sign"], ["lin_z"]),
            node("Neg", ["lin_z"], ["lin_nz"]),
            node("Softplus", ["lin_nz"], ["lin_sp"]),
            node("Sub", [scores, "lin_sp"], ["with_lin"]),
        ]
        scores = "with_lin"
    if model.args["distance"]:
        head.by_length["gap"] = lambda n: np.abs(_offsets(n))
        dist = _pairwise_one(head, "dist", model.distance)
        head.nodes += [  # − log((|offset| − (1 + softplus(dist)))² / 2 + 1)
            node("Softplus", [dist], ["dist_sp"]),
            node("Add", ["dist_sp", "one"], ["dist_d"]),
            node("Sub", ["gap", "dist_d"], ["dist_t"]),
            node("Mul", ["dist_t", "dist_t"], ["dist_t2"]),
            node("Mul", ["dist_t2", "half"], ["dist_h"]),
            node("Add", ["dist_h", "one"], ["dist_h1"]),
            node("Log", ["dist_h1"], ["dist_log"]),
            node("Sub", [scores, "dist_log"], ["with_dist"]),
        ]
        scores = "with_dist"
    head.by_length["self"] = lambda n: np.where(np.eye(n, dtype=bool), -np.inf, 0).astype("f4")
    head.nodes += [
        node("Add", [scores, "self"], ["masked"]),
        node("LogSoftmax", ["masked"], ["scores"], axis=2),
    ]
    _relations(head, model.deprel)
    return head


def _int8_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A matrix as int8 steps of each column's own scale, and the scales."""
    scale = (np.maximum(np.abs(weight).max(0), 1e-12) / 127).astype(np.float32)
    return np.clip(np.rint(weight / scale), -127, 127).astype(np.int8), scale


def _relations(head: Head, scorer: Any) -> None:
    """The relation scorer's best label (less stanza's vocabulary prefix) for every
    (dependent, head) pair: ``relations`` (batch, n, n+1). Its bilinear form runs in int8,
    2–3 × faster, keeping the labels of 99.8 % of captions (docs/PARSER.md)."""
    a, b = _sides(head, "deprel", scorer)
    bilinear = scorer.scorer.W_bilin
    size_i, size_j, size_o = bilinear.weight.shape
    steps, scale = _int8_columns(bilinear.weight.detach().float().reshape(size_i, -1).numpy())
    head.weights.update(rel_w=steps, rel_ws=scale, rel_bias=bilinear.bias.detach().float())
    head.weights.update(rel_rows=np.array([-1, size_i]), rel_tail=np.array([size_j, size_o]))
    head.weights.update(rel_big=np.array([2**31]))
    node = helper.make_node
    head.nodes += [
        node("Slice", [a, "last", "rel_big", "last"], ["rel_dep"]),  # the words, not the root
        node("Shape", ["rel_dep"], ["rel_dep_shape"]),
        node("Slice", ["rel_dep_shape", "first", "third"], ["rel_bn"]),
        node("Reshape", ["rel_dep", "rel_rows"], ["rel_x"]),
        node("DynamicQuantizeLinear", ["rel_x"], ["rel_xq", "rel_xs", "rel_xz"]),
        node("MatMulInteger", ["rel_xq", "rel_w", "rel_xz"], ["rel_yi"]),
        node("Cast", ["rel_yi"], ["rel_yf"], to=TensorProto.FLOAT),
        node("Mul", ["rel_xs", "rel_ws"], ["rel_s"]),
        node("Mul", ["rel_yf", "rel_s"], ["rel_y"]),
        node("Concat", ["rel_bn", "rel_tail"], ["rel_shape"], axis=0),
        node("Reshape", ["rel_y", "rel_shape"], ["rel_form"]),  # (batch, n, J, O)
        node("Unsqueeze", [b, "last"], ["rel_gov"]),  # (batch, 1, n+1, J)
        node("MatMul", ["rel_gov", "rel_form"], ["rel_pairs"]),  # (batch, n, n+1, O)
        node("Add", ["rel_pairs", "rel_bias"], ["rel_scores"]),
        node("ArgMax", ["rel_scores"], ["relations"], axis=3, keepdims=0),
    ]


class OnnxNetwork:
    """A stanza ``HighwayLSTM`` (``model.taggerlstm`` or ``model.parserlstm``), from its
    learnt initial states (2 × layers, 1, hidden), and what follows it (``head``: the
    tagger's or parser's), as one ONNX Runtime session; without a head the stack alone."""

    def __init__(
        self, hlstm: Any, h_init: torch.Tensor, c_init: torch.Tensor, head: Head | None = None
    ) -> None:
        self.layers = hlstm.num_layers
        self.h_init = h_init.detach().float().numpy()
        self.c_init = c_init.detach().float().numpy()
        self.by_length = head.by_length if head else {}
        self._fixed: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        hidden, f = hlstm.lstm[0].lstm.hidden_size, TensorProto.FLOAT
        tensor = helper.make_tensor_value_info
        nodes, weights, x = [], {}, "input"
        inputs = [tensor(x, f, ["B", "T", None])]
        for layer in range(self.layers):
            inputs += [tensor(f"l{layer}_{state}", f, [2, "B", hidden]) for state in ("h0", "c0")]
            part = _layer_nodes(hlstm, layer, x)
            nodes += part.nodes
            weights.update(part.weights)
            x = f"l{layer}_out"
        nodes.append(helper.make_node("Identity", [x], ["x"]))
        outputs: dict[str, int] = {"x": f}
        if head is not None:
            nodes += head.nodes
            weights.update(head.weights)
            inputs += [tensor(name, f, ["T", "T"]) for name in head.by_length]
            outputs = head.outputs
        outs = [tensor(k, kind, ["B", None, None]) for k, kind in outputs.items()]
        self.session = session(graph(nodes, "network", inputs, outs, weights))

    def fixed_inputs(self, batch: int, length: int) -> dict[str, np.ndarray]:
        """The initial states and the length's arrays, remembered for a few shapes (a
        query's is always one sentence)."""
        if (key := (batch, length)) not in self._fixed:
            if len(self._fixed) >= 32:
                self._fixed.clear()
            fixed = {name: make(length) for name, make in self.by_length.items()}
            for layer in range(self.layers):
                rows = slice(2 * layer, 2 * layer + 2)
                for name, init in (("h0", self.h_init), ("c0", self.c_init)):
                    fixed[f"l{layer}_{name}"] = np.ascontiguousarray(
                        np.broadcast_to(init[rows], (2, batch, init.shape[-1]))
                    )
            self._fixed[key] = fixed
        return self._fixed[key]

    def __call__(self, x: np.ndarray) -> list[np.ndarray]:
        """(batch, length, input) → the head's outputs (the stack's: (batch, length, 2×hidden))."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        return self.session.run(None, {"input": x, **self.fixed_inputs(*x.shape[:2])})
