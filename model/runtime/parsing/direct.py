"""Stanza's trained networks called directly: the same trees in a few milliseconds
(docs/PARSER.md, "The direct path"): words by rules (:mod:`.rules`), tags and heads by
the networks (:mod:`.networks`), lemmas word by word (:mod:`.lemmas`), the tree from the
greedy heads when they make one, else Chu-Liu-Edmonds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from groundsearch.model.runtime.parsing import networks
from groundsearch.model.runtime.parsing.lemmas import Lemmatizer
from groundsearch.model.runtime.parsing.onnx_graphs import (
    Head,
    OnnxCharModel,
    OnnxNetwork,
    parser_head,
    tagger_head,
)
from groundsearch.model.runtime.parsing.rules import rule_tokenize
from groundsearch.model.runtime.parsing.tree import DependencyTree, build_tree

#: A sentence's CoNLL-U columns: words, lemmas, upos, xpos, feats, heads, relations.
Columns = tuple[list[str], list[str], list[str], list[str], list[str], list[int], list[str]]
#: Sentences per network batch, all of one length.
BATCH = 256
#: Lemmas remembered, by (word, upos); a query vocabulary fits many times over.
LEMMA_MEMORY = 200_000


def greedy_heads(scores: np.ndarray) -> list[int] | None:
    """Each word's best head (row ``i`` scores word ``i``'s heads, 0 = the root) when
    they form a tree with exactly one root, else None."""
    heads = scores[1:].argmax(axis=1).tolist()
    if heads.count(0) != 1:
        return None
    for start in range(1, scores.shape[0]):  # follow heads up: every word must reach the root
        seen, node = set(), start
        while node:
            if node in seen:
                return None
            seen.add(node)
            node = heads[node - 1]
    return [0, *heads]


def tree_heads(scores: np.ndarray) -> list[int]:
    """Each word's head in the best tree with one root: the greedy heads when they are
    one, else stanza's single-root Chu-Liu-Edmonds."""
    from stanza.models.common.chuliu_edmonds import chuliu_edmonds_one_root

    heads = greedy_heads(scores)
    return [int(h) for h in (heads or chuliu_edmonds_one_root(scores))[1:]]


class DirectParser:
    """Texts → trees with a loaded ``stanza.Pipeline``'s models, mostly bypassing it;
    ``fallback`` parses the texts the rules and the pipeline's tokenizer cannot."""

    def __init__(
        self, pipeline: Any, fallback: Callable[[list[str]], list[DependencyTree]]
    ) -> None:
        self.fallback = fallback
        self.tokenizers = [
            pipeline.processors[name] for name in ("tokenize", "mwt") if name in pipeline.processors
        ]
        self.tagger = pipeline.processors["pos"]
        self.lemmatizer = pipeline.processors["lemma"]
        self.depparse = pipeline.processors["depparse"]
        for trainer in (self.tagger.trainer, self.depparse.trainer):
            trainer.model.eval()
        tagger, parser = self.tagger.trainer.model, self.depparse.trainer.model

        def network(model: Any, lstm: str, head: Callable[[Any], Head]) -> OnnxNetwork:
            stack, h, c = (getattr(model, lstm + s) for s in ("", "_h_init", "_c_init"))
            return OnnxNetwork(stack, h, c, head(model))

        self.tagger_network = network(tagger, "taggerlstm", tagger_head)
        self.parser_network = network(parser, "parserlstm", parser_head)
        parser_chars = OnnxCharModel(parser.charmodel)
        self.tagger_rows = networks.tagger_word_rows(self.tagger, OnnxCharModel(tagger.charmodel))
        self.parser_rows = networks.parser_word_rows(self.depparse, parser_chars)
        self.root = networks.parser_root_row(self.depparse, parser_chars)
        self._lemmas: dict[tuple[str, str], str] = {}
        supported = Lemmatizer.supported(self.lemmatizer)
        self.lemmatize = Lemmatizer(self.lemmatizer) if supported else None
        self.declined = 0  # texts the rules declined (the pipeline's tokenizer cuts them)

    def warm(self, n_words: int) -> None:
        """Compute and keep both networks' word columns of the ``n_words`` commonest words (a
        tenth capitalised too): their queries then skip the character LSTMs (issue 42)."""
        vocab = self.tagger.pretrain.vocab
        end = min(len(vocab), networks.VOCAB_PREFIX_SIZE + n_words)
        common = [vocab.id2unit(i) for i in range(networks.VOCAB_PREFIX_SIZE, end)]
        words = common + [w.capitalize() for w in common[: n_words // 10]]
        for rows in (self.tagger_rows, self.parser_rows):
            rows.keep(words)

    def parse(self, texts: Sequence[str]) -> list[DependencyTree]:
        """The tree of each cleaned text (:func:`.parser.clean_text`), in order."""
        tokenized = [rule_tokenize(t) for t in texts]
        if declined := [i for i, words in enumerate(tokenized) if words is None]:
            self.declined += len(declined)
            cuts = self.pipeline_words([texts[i] for i in declined])
            for i, cut in zip(declined, cuts, strict=True):
                tokenized[i] = cut
        by_length: dict[int, list[int]] = {}
        for i, words in enumerate(tokenized):
            if words is not None:
                by_length.setdefault(len(words), []).append(i)
        out: list[DependencyTree | None] = [None] * len(texts)
        for same_length in by_length.values():
            for start in range(0, len(same_length), BATCH):
                chunk = same_length[start : start + BATCH]
                sentences = [tokenized[i] for i in chunk]
                for i, columns in zip(chunk, self.columns(sentences), strict=True):  # type: ignore[arg-type]
                    out[i] = build_tree(texts[i], *columns)
        if rest := [i for i, words in enumerate(tokenized) if words is None]:
            for i, tree in zip(rest, self.fallback([texts[i] for i in rest]), strict=True):
                out[i] = tree
        return out  # type: ignore[return-value]

    def pipeline_words(self, texts: list[str]) -> list[list[str] | None]:
        """Each text's words as the pipeline's tokenizer cuts them; None for a text it makes
        into several sentences (or none), which the whole pipeline parses."""
        import stanza

        docs = [stanza.Document([], text=t) for t in texts]
        for processor in self.tokenizers:
            docs = processor.bulk_process(docs)
        return [
            [w.text for w in doc.sentences[0].words] if len(doc.sentences) == 1 else None
            for doc in docs
        ]

    def columns(self, sentences: list[list[str]]) -> list[Columns]:
        """The columns of sentences that all have the same number of words."""
        tags = networks.tag(self.tagger, self.tagger_rows, self.tagger_network, sentences)
        lemmas = self.lemmas(sentences, tags)
        scores, labels = networks.arc_scores(
            self.depparse, self.parser_rows, self.parser_network, self.root, sentences, tags, lemmas
        )
        heads = [tree_heads(s) for s in scores]
        deprels = networks.relations(self.depparse, labels, heads)
        columns: list[Columns] = []
        for words, tagged, lemma, head, deprel in zip(
            sentences, tags, lemmas, heads, deprels, strict=True
        ):
            upos, xpos, feats = ([t[k] or blank for t in tagged] for k, blank in enumerate("X__"))
            deprel = ["root" if h == 0 else (d or "dep") for h, d in zip(head, deprel, strict=True)]
            columns.append((words, lemma, upos, xpos, feats, head, deprel))
        return columns

    def lemmas(self, sentences: list[list[str]], tags: list[list[list[str]]]) -> list[list[str]]:
        """Each word's lemma by stanza's lemmatizer, remembered by (word, upos)."""
        from stanza.models.common.doc import Document

        keys = [
            [(w, t[0]) for w, t in zip(s, ts, strict=True)]
            for s, ts in zip(sentences, tags, strict=True)
        ]
        if missing := sorted({k for sentence in keys for k in sentence if k not in self._lemmas}):
            if len(self._lemmas) + len(missing) > LEMMA_MEMORY:
                self._lemmas.clear()
            if self.lemmatize is not None:
                self._lemmas.update(zip(missing, self.lemmatize(missing), strict=True))
            else:
                doc = Document([[{"id": 1, "text": w, "upos": u}] for w, u in missing])
                done = self.lemmatizer.process(doc)
                for key, sentence in zip(missing, done.sentences, strict=True):
                    self._lemmas[key] = sentence.words[0].lemma or key[0]
        return [[self._lemmas[k] for k in sentence] for sentence in keys]
