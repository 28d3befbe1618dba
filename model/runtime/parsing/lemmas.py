"""Stanza's lemmatizer for a few words at a time, without its pipeline.

``LemmaProcessor.process`` builds a Document and a DataLoader and decodes in eager
PyTorch, about half a millisecond a character: 5 ms for one word the dictionary does not
hold, most of a query's parse when a word is new. Here the same model does the same
steps (docs/PARSER.md): the dictionary first (``ensemble_dict``), then the edit
classifier (a word kept as it is, or lowercased, needs no decoding), then greedy decoding
with attention and the copy mechanism, in numpy, one word at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stanza.models.common import seq2seq_constant as constant
from stanza.models.common.vocab import DeltaVocab
from stanza.models.lemma import edit

#: Edit classes after which the seq2seq output is not used.
_KEEP, _LOWER = edit.EDIT_TO_ID["identity"], edit.EDIT_TO_ID["lower"]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def _weights(module: Any) -> list[np.ndarray]:
    return [p.detach().float().numpy() for p in module.parameters()]


def _cell(
    projected: np.ndarray, h: np.ndarray, c: np.ndarray, w_hh: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step from the input's projection ``w_ih @ x + b_ih + b_hh`` (PyTorch's
    gate order: input, forget, cell, output); ``h``, ``c`` (…, hidden), ``w_hh`` (…, 4
    hidden, hidden): several independent cells at once."""
    n = h.shape[-1]
    gates = projected + np.matmul(w_hh, h[..., None])[..., 0]
    sig = 1 / (1 + np.exp(-gates))
    c = sig[..., n : 2 * n] * c + sig[..., :n] * np.tanh(gates[..., 2 * n : 3 * n])
    return sig[..., 3 * n :] * np.tanh(c), c


def _lstm(module: Any, suffix: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An LSTM's (or a direction's: ``suffix``) w_ih, w_hh and b_ih + b_hh, as float32."""
    w_ih, w_hh, b_ih, b_hh = (
        getattr(module, name + suffix).detach().float().numpy()
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    )
    return w_ih, w_hh, b_ih + b_hh


class Lemmatizer:
    """(word, upos) pairs → lemmas, as ``processor`` (a loaded ``LemmaProcessor``) makes
    them. ``supported(processor)`` says whether its configuration is the one done here."""

    def __init__(self, processor: Any) -> None:
        self.trainer = processor.trainer
        self.vocab = processor.vocab
        model = self.trainer.model
        self.max_steps = model.max_dec_len
        self.embedding = model.embedding.weight.detach().float().numpy()
        self.pos_embedding = model.pos_embedding.weight.detach().float().numpy()
        self.directions = [_lstm(model.encoder, "_l0"), _lstm(model.encoder, "_l0_reverse")]
        w_ih, self.decoder_hh, bias = _lstm(model.decoder.lstm_cell)
        self.decoder_inputs = self.embedding @ w_ih.T + bias  # each character's projection
        attention = model.decoder.attention_layer
        self.attn_in = attention.linear_in.weight.detach().float().numpy()
        self.attn_out = attention.linear_out.weight.detach().float().numpy()
        self.to_vocab = _weights(model.dec2vocab)
        self.copy_gate = _weights(model.copy_gate)
        self.edit = [_weights(model.edit_clf[0]), _weights(model.edit_clf[2])]

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
        context, (h, c) = self.encode(inputs)
        first, second = self.edit
        hidden = np.maximum(first[0] @ h + first[1], 0)
        choice = int(np.argmax(second[0] @ hidden + second[1]))
        if choice == _KEEP:
            return word
        if choice == _LOWER:
            return word.lower()
        out: list[int] = []
        token = constant.SOS_ID
        for _ in range(self.max_steps):
            x = self.decoder_inputs[token if token < len(self.embedding) else constant.UNK_ID]
            h, c = _cell(x, h, c, self.decoder_hh)
            token = int(np.argmax(self.step(h, context, src)))
            if token == constant.EOS_ID:
                break
            out.append(token)
        lemma = "".join(chars.unmap(out))
        return word if not lemma or constant.UNK in lemma else lemma

    def encode(self, inputs: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The encoder's outputs (positions × 2 hidden) and the decoder's first state
        (stanza's order: the backward direction's last state, then the forward's)."""
        (wf, rf, bf), (wb, rb, bb) = self.directions
        projected = np.stack([inputs @ wf.T + bf, inputs[::-1] @ wb.T + bb], 1)
        w_hh = np.stack([rf, rb])
        h = c = np.zeros((2, rf.shape[1]), np.float32)
        outs = []
        for x in projected:  # both directions at once, the backward one from the end
            h, c = _cell(x, h, c, w_hh)
            outs.append(h)
        states = np.array(outs)
        context = np.hstack([states[:, 0], states[::-1, 1]])
        return context, (np.concatenate([h[1], h[0]]), np.concatenate([c[1], c[0]]))

    def step(self, h: np.ndarray, context: np.ndarray, src: np.ndarray) -> np.ndarray:
        """Log-probabilities of the next character: the vocabulary's and the copied
        source characters' (``Seq2SeqModel.decode`` with ``copy``)."""
        log_attn = _log_softmax(context @ (self.attn_in @ h))
        h_tilde = np.tanh(self.attn_out @ np.concatenate([np.exp(log_attn) @ context, h]))
        log_probs = _log_softmax(self.to_vocab[0] @ h_tilde + self.to_vocab[1])
        gate = float((self.copy_gate[0] @ h_tilde + self.copy_gate[1])[0])
        log_copy = -np.logaddexp(0, -gate) + _log_softmax(log_attn[1:])  # not the tag's slot
        top = log_copy.max()
        size = max(len(log_probs), int(src.max()) + 1)
        copied = np.zeros(size, np.float32)
        np.add.at(copied, src, np.exp(log_copy - top))
        empty = copied == 0
        log_copied = np.where(empty, -1e12, np.log(np.where(empty, 1e-12, copied)) + top)
        if size > len(log_probs):  # characters the vocabulary lacks score as its UNK
            log_probs = np.concatenate(
                [log_probs, np.full(size - len(log_probs), log_probs[constant.UNK_ID])]
            )
        return np.logaddexp(log_copied, log_probs - np.log1p(np.exp(gate)))
