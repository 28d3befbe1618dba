"""Stanza's lemmatizer without its pipeline (docs/PARSER.md): the dictionary, the edit
classifier, then greedy decoding with attention and copying, a step an ONNX Runtime call."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper
from stanza.models.common import seq2seq_constant as constant
from stanza.models.common.vocab import DeltaVocab
from stanza.models.lemma import edit

from groundsearch.model.runtime.parsing.onnx_graphs import OnnxBiLSTM, graph, session

#: Edit classes after which the seq2seq output is not used.
_KEEP, _LOWER = edit.EDIT_TO_ID["identity"], edit.EDIT_TO_ID["lower"]


def _array(tensor: Any) -> np.ndarray:
    return tensor.detach().float().numpy()


class Lemmatizer:
    """(word, upos) pairs → lemmas, as ``processor`` (a loaded ``LemmaProcessor``) makes
    them. ``supported(processor)`` says whether its configuration is the one done here."""

    def __init__(self, processor: Any) -> None:
        self.trainer = processor.trainer
        self.vocab = processor.vocab
        model = self.trainer.model
        self.max_steps = model.max_dec_len
        self.embedding = _array(model.embedding.weight)
        self.pos_embedding = _array(model.pos_embedding.weight)
        self.encoder = OnnxBiLSTM(model.encoder)
        self.edit = [_array(p) for p in model.edit_clf.parameters()]  # two layers, ReLU
        attention = model.decoder.attention_layer
        self.hidden = attention.linear_in.weight.shape[0]
        self.attn_in = _array(attention.linear_in.weight)
        self.attn_context = _array(attention.linear_out.weight)[:, : self.hidden].T.copy()
        self.output_size = model.dec2vocab.out_features
        self.step = session(_step_graph(model, self.hidden, self.output_size))

    @staticmethod
    def supported(processor: Any) -> bool:
        """The configuration done here: the dictionary first, greedy decoding, one
        encoder layer, soft attention, the copy mechanism, edits, no contextual parts."""
        config, trainer = processor.config, getattr(processor, "trainer", None)
        if trainer is None or getattr(trainer, "model", None) is None:
            return False
        args, model = trainer.args, trainer.model
        return bool(
            config.get("ensemble_dict")
            and not config.get("dict_only")
            and config.get("beam_size", 1) == 1
            and not trainer.has_contextual_lemmatizers()
            and not args.get("caseless")
            and args.get("edit")
            and model.copy
            and model.use_pos
            and args.get("attn_type") == "soft"
            and model.encoder.num_layers == 1
            and model.contextual_embedding is None
        )

    def __call__(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The lemma of each (word, upos)."""
        known = self.trainer.skip_seq2seq(pairs)
        hits = [pair for pair, hit in zip(pairs, known, strict=True) if hit]
        by_dictionary = iter(self.trainer.predict_dict(hits))
        return [
            (next(by_dictionary) if k else self.predict(word, upos)) or "_"
            for (word, upos), k in zip(pairs, known, strict=True)
        ]

    def predict(self, word: str, upos: str) -> str:
        """The model's lemma of a word the dictionary does not hold."""
        chars = DeltaVocab([word], self.vocab["char"])
        src = np.array(chars.map([constant.SOS, *word, constant.EOS]))
        inputs = self.embedding[np.where(src >= len(self.embedding), constant.UNK_ID, src)]
        inputs = np.vstack([self.pos_embedding[self.vocab["pos"].unit2id(upos)], inputs])
        context, h, c = self.encoder(inputs)
        h, c = np.concatenate([h[1], h[0]]), np.concatenate([c[1], c[0]])  # backward first
        w1, b1, w2, b2 = self.edit
        choice = int(np.argmax(w2 @ np.maximum(w1 @ h + b1, 0) + b2))
        if choice == _KEEP:
            return word
        if choice == _LOWER:
            return word.lower()
        size = max(self.output_size, int(src.max()) + 1)
        ids = np.arange(size)  # characters the vocabulary lacks score as its UNK
        copies = np.zeros((len(src), size), np.float32)  # each source position's id
        copies[np.arange(len(src)), src] = 1
        feed = {
            "keys": (context @ self.attn_in).T.copy(),
            "values": context @ self.attn_context,
            "copies": copies,
            "widen": np.where(ids < self.output_size, ids, constant.UNK_ID),
            "token": np.array([constant.SOS_ID]),
            "h": h[None],
            "c": c[None],
        }
        out: list[int] = []
        for _ in range(self.max_steps):
            token, feed["h"], feed["c"] = self.step.run(None, feed)
            if int(token[0]) == constant.EOS_ID:
                break
            out.append(int(token[0]))
            feed["token"] = np.where(token < len(self.embedding), token, constant.UNK_ID)
        lemma = "".join(chars.unmap(out))
        return word if not lemma or constant.UNK in lemma else lemma


def _step_graph(model: Any, hidden: int, vocab: int) -> Any:
    """One decoder step as an ONNX graph: the previous character → the LSTM cell → soft
    attention → the vocabulary's and the copy mechanism's log-probabilities (numbers as
    ``Seq2SeqModel.decode`` with ``copy``) → the next character, by greedy choice."""
    cell = model.decoder.lstm_cell
    attention = model.decoder.attention_layer
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    w_ih, w_hh, b_ih, b_hh = (_array(getattr(cell, n)) for n in names)
    # the vocabulary's scores and the copy gate: one product
    out_w = np.vstack([_array(model.dec2vocab.weight), _array(model.copy_gate.weight)])
    out_b = np.concatenate([_array(model.dec2vocab.bias), _array(model.copy_gate.bias)])
    weights = {
        "inputs": _array(model.embedding.weight) @ w_ih.T + b_ih + b_hh,  # each character's
        "R": w_hh.T.copy(),
        "out_W": out_w.T.copy(),
        "out_b": out_b,
        "attn_h": _array(attention.linear_out.weight)[:, hidden:].T.copy(),
        "splits": np.array([hidden] * 4, dtype=np.int64),
        **{k: np.array([v], np.int64) for k, v in dict(zero=0, one=1, vocab=vocab).items()},
        **{k: np.array([v], np.int64) for k, v in dict(end=vocab + 1, big=2**31).items()},
        **{k: np.array([v], np.float32) for k, v in (("never", -1e12), ("tiny", 1e-12))},
        "nought": np.array([0], np.float32),
    }
    n = helper.make_node
    nodes = [
        n("Gather", ["inputs", "token"], ["x"]),  # (1, 4 hidden)
        n("MatMul", ["h", "R"], ["rh"]),  # row vectors: 1-D products take a slow path
        n("Add", ["x", "rh"], ["gates"]),
        n("Split", ["gates", "splits"], ["gi", "gf", "gg", "go"], axis=1),
        n("Sigmoid", ["gi"], ["i"]),
        n("Sigmoid", ["gf"], ["f"]),
        n("Tanh", ["gg"], ["g"]),
        n("Sigmoid", ["go"], ["o"]),
        n("Mul", ["f", "c"], ["fc"]),
        n("Mul", ["i", "g"], ["ig"]),
        n("Add", ["fc", "ig"], ["c_next"]),
        n("Tanh", ["c_next"], ["tc"]),
        n("Mul", ["o", "tc"], ["h_next"]),
        n("MatMul", ["h_next", "keys"], ["logits"]),  # h · (context · attn_in)ᵀ
        n("LogSoftmax", ["logits"], ["log_attn"], axis=1),
        n("Exp", ["log_attn"], ["attn"]),
        n("MatMul", ["attn", "values"], ["weighted"]),  # attn · (context · W₁ᵀ)
        n("MatMul", ["h_next", "attn_h"], ["wh"]),
        n("Add", ["weighted", "wh"], ["pre"]),
        n("Tanh", ["pre"], ["h_tilde"]),
        n("MatMul", ["h_tilde", "out_W"], ["o0"]),
        n("Add", ["o0", "out_b"], ["scores"]),
        n("Slice", ["scores", "zero", "vocab", "one"], ["vocab_logits"]),
        n("Slice", ["scores", "vocab", "end", "one"], ["gate"]),
        n("LogSoftmax", ["vocab_logits"], ["lp0"], axis=1),
        n("Gather", ["lp0", "widen"], ["lp"], axis=1),
        n("Softplus", ["gate"], ["nocopy"]),  # log(1 + e^gate)
        n("Sub", ["lp", "nocopy"], ["kept"]),
        n("Neg", ["gate"], ["neg_gate"]),
        n("Softplus", ["neg_gate"], ["sp"]),
        n("Slice", ["log_attn", "one", "big", "one"], ["la"]),  # not the tag's slot
        n("LogSoftmax", ["la"], ["la2"], axis=1),
        n("Sub", ["la2", "sp"], ["lc"]),
        n("ReduceMax", ["lc"], ["top"], axes=[1], keepdims=1),
        n("Sub", ["lc", "top"], ["lc0"]),
        n("Exp", ["lc0"], ["pc"]),
        n("MatMul", ["pc", "copies"], ["copied"]),
        n("Equal", ["copied", "nought"], ["empty"]),
        n("Where", ["empty", "tiny", "copied"], ["safe"]),
        n("Log", ["safe"], ["ls"]),
        n("Add", ["ls", "top"], ["ls2"]),
        n("Where", ["empty", "never", "ls2"], ["log_copied"]),
        n("Max", ["log_copied", "kept"], ["m"]),  # log(e^a + e^b), as torch.logsumexp
        n("Sub", ["log_copied", "m"], ["a0"]),
        n("Sub", ["kept", "m"], ["b0"]),
        n("Exp", ["a0"], ["ea"]),
        n("Exp", ["b0"], ["eb"]),
        n("Add", ["ea", "eb"], ["s"]),
        n("Log", ["s"], ["ls3"]),
        n("Add", ["m", "ls3"], ["final"]),
        n("ArgMax", ["final"], ["next"], axis=1, keepdims=0),
    ]
    t = helper.make_tensor_value_info
    f, i = TensorProto.FLOAT, TensorProto.INT64
    return graph(
        nodes,
        "lemma_step",
        [
            t("token", i, [1]),
            t("h", f, [1, hidden]),
            t("c", f, [1, hidden]),
            t("keys", f, [hidden, "P"]),
            t("values", f, ["P", hidden]),
            t("copies", f, ["S", "V"]),
            t("widen", i, ["V"]),
        ],
        [t("next", i, [1]), t("h_next", f, [1, hidden]), t("c_next", f, [1, hidden])],
        weights,
    )
