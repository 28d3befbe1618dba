"""The tagger's and the parser's forward passes for sentences of one length (nothing is
packed): each network's inputs (a word's own columns, remembered by ``WordRows``; tags;
lemmas) and what its outputs mean, with stanza's weights and arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

ROOT_ID = 3  # stanza.models.common.vocab.ROOT_ID
VOCAB_PREFIX_SIZE = 4  # stanza.models.common.vocab.VOCAB_PREFIX_SIZE
#: Words' character ids → one vector a word (``onnx_graphs.OnnxCharModel``).
CharVectors = Callable[[list[list[int]]], np.ndarray]
#: A network after its word columns, run elsewhere (``onnx_graphs.OnnxNetwork``):
#: (batch, length, input) → its outputs.
Network = Callable[[np.ndarray], list[np.ndarray]]


class WordRows:
    """A network's input columns that depend on the word alone, remembered by the word
    (up to ``memory`` words besides those kept for good, then all forgotten)."""

    def __init__(self, compute: Callable[[list[str]], np.ndarray], memory: int = 50_000):
        self.compute, self.memory = compute, memory
        self.kept: dict[str, np.ndarray] = {}
        self.rows: dict[str, np.ndarray] = {}

    def __call__(self, words: list[str]) -> np.ndarray:
        """(len(words), columns): each word's row."""
        if missing := list(dict.fromkeys(w for w in words if w not in self.rows)):
            if len(self.rows) + len(missing) > self.memory + len(self.kept):
                self.rows = dict(self.kept)
            self.rows.update(zip(missing, self.compute(missing), strict=True))
        return np.stack([self.rows[w] for w in words])

    def keep(self, words: list[str], chunk: int = 256) -> None:
        """Compute the rows of ``words`` now and keep them for good (in chunks of words of
        about one length: a chunk's character LSTM runs to its longest word)."""
        new = sorted(dict.fromkeys(w for w in words if w not in self.kept), key=len)
        for start in range(0, len(new), chunk):
            part = new[start : start + chunk]
            self.kept.update(zip(part, self.compute(part), strict=True))
        self.rows.update(self.kept)


#: The order of the parser's columns.
PARSER_ORDER = ("pretrained", "word", "char")


class _Columns:
    """A network's columns of words that depend on the word alone (embeddings, character
    vector), in numpy, in the network's ``order`` (of "word", "pretrained", "char")."""

    def __init__(self, processor: Any, char_vectors: CharVectors, order: tuple[str, ...]):
        model = processor.trainer.model
        self.vocab, self.pretrain = processor.vocab, processor.pretrain.vocab
        self.chars, self.order = char_vectors, order
        self.word = model.word_emb.weight.detach().numpy()
        self.pretrained = model.pretrained_emb.weight.detach().numpy()
        self.maps = {  # stanza's linear maps here have no bias
            "pretrained": model.trans_pretrained.weight.detach().numpy().T,
            "char": model.trans_char.weight.detach().numpy().T,
        }

    def __call__(self, words: list[str]) -> np.ndarray:
        """(len(words), columns)."""
        return self.of(
            self.vocab["word"].map(words),
            self.pretrain.map([w.lower() for w in words]),
            [self.vocab["char"].map(list(w)) for w in words],
        )

    def of(self, word: list[int], pretrained: list[int], chars: list[list[int]]) -> np.ndarray:
        """The columns of tokens given by their ids in each vocabulary."""
        inputs = {
            "word": self.word[word],
            "pretrained": self.pretrained[pretrained] @ self.maps["pretrained"],
            "char": self.chars(chars) @ self.maps["char"],
        }
        return np.concatenate([inputs[name] for name in self.order], 1)


def tagger_word_rows(tagger: Any, char_vectors: CharVectors) -> WordRows:
    """The tagger's word, pretrained and character columns of words, remembered."""
    return WordRows(_Columns(tagger, char_vectors, ("word", "pretrained", "char")))


def parser_word_rows(depparse: Any, char_vectors: CharVectors) -> WordRows:
    """The parser's pretrained, word and character columns of words, remembered."""
    return WordRows(_Columns(depparse, char_vectors, PARSER_ORDER))


def parser_root_row(depparse: Any, char_vectors: CharVectors) -> np.ndarray:
    """The parser's pretrained, word and character columns of the root token."""
    columns = _Columns(depparse, char_vectors, PARSER_ORDER)
    return columns.of([ROOT_ID], [ROOT_ID], [[ROOT_ID]])[0]


#: Each tagger's tag ids → names (a few hundred combinations), by ``id(tagger)``.
_TAG_NAMES: dict[int, dict[tuple[int, ...], tuple[str, str, str]]] = {}


def tag(
    tagger: Any, rows: WordRows, network: Network, sentences: list[list[str]]
) -> list[list[list[str]]]:
    """[upos, xpos, feats] for every word of sentences that all have the same length
    (``network``: the tagger's stack and ``onnx_graphs.tagger_head``)."""
    vocab, names = tagger.vocab, _TAG_NAMES.setdefault(id(tagger), {})
    batch, length = len(sentences), len(sentences[0])
    x = rows([w for s in sentences for w in s]).reshape(batch, length, -1)
    (ids,) = network(x)
    tagged = []
    for sentence in ids.tolist():
        for row in sentence:  # (upos, xpos, *feats) ids → names, remembered by the ids
            key = tuple(row)
            if key not in names:
                upos, xpos = vocab["upos"].id2unit(row[0]), vocab["xpos"].id2unit(row[1])
                names[key] = (upos, xpos, vocab["feats"].id2unit(row[2:]))
            tagged.append(list(names[key]))
    return [tagged[i : i + length] for i in range(0, len(tagged), length)]


def arc_scores(
    depparse: Any,
    rows: WordRows,
    network: Network,
    root: np.ndarray,
    sentences: list[list[str]],
    tags: list[list[list[str]]],
    lemmas: list[list[str]],
) -> tuple[np.ndarray, np.ndarray]:
    """The parser's head log-probabilities (batch, n+1, n+1), with position 0 the root, and
    its relation scorer's best label of every pair (batch, n, n+1) (``network``: the
    parser's stack and ``onnx_graphs.parser_head``; ``root``: ``parser_root_row``)."""
    model, vocab = depparse.trainer.model, depparse.vocab
    batch, length = len(sentences), len(sentences[0]) + 1
    tags_flat = [t for ts in tags for t in ts]

    def rooted(ids: list[int]) -> np.ndarray:
        table = np.asarray(ids).reshape(batch, length - 1)
        return np.concatenate([np.full((batch, 1), ROOT_ID), table], 1)

    def table(embedding: Any) -> np.ndarray:
        return embedding.weight.detach().numpy()

    lemma = rooted(vocab["lemma"].map([lem for ls in lemmas for lem in ls]))
    upos = rooted(vocab["upos"].map([t[0] for t in tags_flat]))
    xpos = rooted(vocab["xpos"].map([t[1] for t in tags_flat]))
    words = rows([w for s in sentences for w in s]).reshape(batch, length - 1, -1)
    words = np.concatenate([np.broadcast_to(root, (batch, 1, len(root))), words], 1)
    first = model.trans_pretrained.out_features + model.word_emb.embedding_dim
    pos = table(model.upos_emb)[upos] + table(model.xpos_emb)[xpos]
    # pretrained and word, lemma, the tags twice (as stanza's parser; feats never), chars
    lemma_columns = table(model.lemma_emb)[lemma]
    x = np.concatenate([words[..., :first], lemma_columns, pos, pos, words[..., first:]], 2)
    scores, labels = network(x)
    return scores, labels


def relations(depparse: Any, labels: np.ndarray, heads: list[list[int]]) -> list[list[str]]:
    """Each word's relation to its chosen head (heads[s][j] for word j+1), from the
    network's best label of every pair ``labels`` (batch, n, n+1)."""
    chosen = np.take_along_axis(labels, np.asarray(heads)[:, :, None], 2)[:, :, 0]
    vocab = depparse.vocab["deprel"]
    return [vocab.unmap(ids) for ids in (chosen + VOCAB_PREFIX_SIZE).tolist()]
