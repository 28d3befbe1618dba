"""The direct parse (``parsing.direct``): the pipeline's trees from the same models, the
rules that decide which texts it takes, and the greedy tree that stands in for
Chu-Liu-Edmonds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.parsing.direct import greedy_heads
from groundsearch.model.runtime.parsing.networks import WordRows
from groundsearch.model.runtime.parsing.parser import Parser, clean_text
from groundsearch.model.runtime.parsing.rules import rule_tokenize


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("A dog runs on the beach .", ["A", "dog", "runs", "on", "the", "beach", "."]),
        (
            "a woman's red hat, on a chair",
            ["a", "woman", "'s", "red", "hat", ",", "on", "a", "chair"],
        ),
        ("Two dogs (one black) play!", ["Two", "dogs", "(", "one", "black", ")", "play", "!"]),
        ("We cannot see 3 cats", ["We", "can", "not", "see", "3", "cats"]),
    ],
)
def test_plain_sentences_are_split_as_ewt_writes_them(text, words):
    assert rule_tokenize(text) == words


@pytest.mark.parametrize(
    "text",
    [
        "A dark-haired man",  # EWT's tokenizer splits some hyphenated words, not others
        "It wasn't me",  # a contraction ('s is the one the rules take: EWT splits it so)
        "A dog. A cat.",  # two sentences
        "a 3d printed bed",  # letters glued to digits
        "5,000 people",  # a number with a comma
        'a "quoted" word',
        "Wow!!!",
        "...",
        "café au lait",
    ],
)
def test_anything_else_is_left_to_the_pipelines_tokenizer(text):
    assert rule_tokenize(text) is None


def test_the_greedy_tree_is_the_maximum_spanning_tree_whenever_it_is_one():
    """On head scores as the parser gives them (each word's row a log-softmax), the best
    head of each word, when those make a tree with one root, is the tree stanza's
    single-root Chu-Liu-Edmonds returns."""
    from stanza.models.common.chuliu_edmonds import chuliu_edmonds_one_root

    rng = np.random.default_rng(0)
    trees = 0
    for _ in range(300):
        n = int(rng.integers(2, 12))
        scores = rng.normal(size=(n, n)) * 3
        np.fill_diagonal(scores, -np.inf)
        scores -= np.log(np.exp(scores).sum(axis=1, keepdims=True))  # log-softmax, as parsed
        greedy = greedy_heads(scores)
        if greedy is not None:
            trees += 1
            assert greedy[1:] == list(chuliu_edmonds_one_root(scores))[1:]
    assert trees > 20  # the test saw both cases


def test_the_direct_parse_gives_the_pipelines_trees_on_real_captions(parser):
    """60 Flickr8k captions (some the rules decline), parsed both ways without a cache."""
    settings = get_settings()
    lines = (settings.flickr8k_dir / "Flickr8k.token.txt").read_text().splitlines()
    texts = random.Random(3).sample([clean_text(line.split("\t")[1]) for line in lines], 60)
    direct = Parser(settings.parser_dir, parser.cache_dir, use_cache=False)
    pipeline = Parser(settings.parser_dir, parser.cache_dir, use_cache=False, direct=False)
    one_by_one = [direct.parse_one(t) for t in texts[:10]]
    assert direct.parse(texts) == pipeline.parse(texts)
    assert one_by_one == pipeline.parse(texts[:10])
    assert 0 < direct.direct_parser.declined < len(texts)


def test_kept_word_rows_are_computed_once_and_outlive_the_memory():
    calls: list[list[str]] = []

    def compute(words: list[str]) -> np.ndarray:
        calls.append(list(words))
        return np.array([[len(w), ord(w[0])] for w in words], dtype=np.float32)

    rows = WordRows(compute, memory=2)
    rows.keep(["a", "bb", "a"])
    rows.keep(["bb"])
    rows(["cc", "d"])
    assert set(rows.rows) == {"a", "bb", "cc", "d"}
    rows(["e"])  # past the memory: the remembered words go, the kept ones stay
    assert set(rows.rows) == {"a", "bb", "e"}
    assert rows(["bb", "a", "bb"]).tolist() == [[2, 98], [1, 97], [2, 98]]
    assert calls == [["a", "bb"], ["cc", "d"], ["e"]]


def test_a_parser_warmed_with_common_words_makes_the_same_trees(parser):
    """As a server's parser is warmed: both collections' captions get a cold parser's
    trees, and a query of common words computes no word's columns."""
    settings = get_settings()
    lines = (settings.flickr8k_dir / "Flickr8k.token.txt").read_text().splitlines()
    web = (settings.data_dir / "cc-web" / "captions.tsv").read_text().splitlines()
    rng = random.Random(5)
    texts = [
        clean_text(line.split("\t")[1]) for line in rng.sample(lines, 30) + rng.sample(web, 30)
    ]
    cold = Parser(settings.parser_dir, parser.cache_dir, use_cache=False)
    warm = Parser(settings.parser_dir, parser.cache_dir, use_cache=False)
    warm.warm(3000)
    direct = warm.direct_parser
    assert 3000 < len(direct.tagger_rows.kept) == len(direct.parser_rows.kept) <= 3300
    assert "The" in direct.tagger_rows.kept
    assert warm.parse(texts) == cold.parse(texts)
    assert [warm.parse_one(t) for t in texts[:5]] == cold.parse(texts[:5])
    known = len(direct.tagger_rows.rows), len(direct.parser_rows.rows)
    warm.parse_one("The man is in the water with two children .")
    assert (len(direct.tagger_rows.rows), len(direct.parser_rows.rows)) == known


def _stack(model, network):
    if network == "tagger":
        return model.taggerlstm, model.taggerlstm_h_init, model.taggerlstm_c_init
    return model.parserlstm, model.parserlstm_h_init, model.parserlstm_c_init


def _theirs(hlstm, h, c, x):
    """stanza's own ``HighwayLSTM`` over x from the learnt initial states."""
    from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

    batch, length = x.shape[:2]
    hx = (h.expand(-1, batch, -1).contiguous(), c.expand(-1, batch, -1).contiguous())
    out, _ = hlstm(x, [length] * batch, hx=hx)
    return pad_packed_sequence(out, batch_first=True)[0] if isinstance(out, PackedSequence) else out


@pytest.mark.parametrize("network", ["tagger", "parser"])
def test_the_onnx_stacks_compute_what_stanzas_modules_do(parser, network):
    """The highway BiLSTM stacks in ONNX Runtime against stanza's own ``HighwayLSTM`` on
    the same inputs: a batch of three sentences of seven words."""
    import torch

    from groundsearch.model.runtime.parsing.onnx_graphs import OnnxNetwork

    direct = parser.direct_parser
    model = (direct.tagger if network == "tagger" else direct.depparse).trainer.model
    hlstm, h, c = _stack(model, network)
    x = torch.randn(3, 7, hlstm.lstm[0].lstm.input_size, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        theirs = _theirs(hlstm, h, c, x)
        (got,) = map(torch.from_numpy, OnnxNetwork(hlstm, h, c)(x.numpy()))
    assert got.shape == theirs.shape == (3, 7, 2 * hlstm.lstm[0].lstm.hidden_size)
    torch.testing.assert_close(got, theirs, atol=1e-5, rtol=1e-4)


def test_the_onnx_heads_compute_what_stanzas_modules_do(parser):
    """The tagger's classifiers and the parser's scorers, in the same sessions as their
    stacks, against stanza's modules (``Tagger.forward``'s and
    ``GraphParser.forward_scores``' arithmetic in evaluation mode)."""
    import torch
    import torch.nn.functional as F

    direct = parser.direct_parser
    tagger, model = direct.tagger.trainer.model, direct.depparse.trainer.model
    gen = torch.Generator().manual_seed(2)
    with torch.inference_mode():
        x = torch.randn(3, 7, tagger.taggerlstm.lstm[0].lstm.input_size, generator=gen)
        hidden = F.relu(tagger.upos_hid(_theirs(*_stack(tagger, "tagger"), x)))
        layers = [tagger.upos_clf, tagger.tag_clf["xpos"], *tagger.tag_clf["feats"]]
        expected = torch.stack([layer(hidden).argmax(-1) for layer in layers], 2)
        (ids,) = map(torch.from_numpy, direct.tagger_network(x.numpy()))
        assert torch.equal(ids, expected)

        x = torch.randn(2, 9, model.parserlstm.lstm[0].lstm.input_size, generator=gen)
        hidden = _theirs(*_stack(model, "parser"), x)
        scores = model.unlabeled(hidden, hidden).squeeze(3)
        offset = torch.arange(9)[None, None, :] - torch.arange(9)[None, :, None]
        lin = model.linearization(hidden, hidden).squeeze(3)
        scores = scores + F.logsigmoid(lin * torch.sign(offset).float())
        dist = 1 + F.softplus(model.distance(hidden, hidden).squeeze(3))
        scores = scores - torch.log((offset.abs().float() - dist) ** 2 / 2 + 1)
        scores = F.log_softmax(scores.masked_fill(torch.eye(9, dtype=torch.bool), -float("inf")), 2)
        got, labels = map(torch.from_numpy, direct.parser_network(x.numpy()))
        torch.testing.assert_close(got, scores, atol=1e-4, rtol=1e-4)
        # the relation scorer's best label of each (dependent, head) pair, its form in int8
        theirs = model.deprel(hidden, hidden).argmax(3)[:, 1:]
        assert labels.shape == theirs.shape == (2, 8, 9)
        assert (labels == theirs).float().mean() > 0.95


@pytest.mark.parametrize("network", ["tagger", "parser"])
def test_the_onnx_character_models_compute_what_stanzas_do(parser, network):
    """Each word's character vector from ONNX Runtime against stanza's own
    ``CharacterModel.forward`` (words of different lengths, one a single character)."""
    import torch

    from groundsearch.model.runtime.parsing.onnx_graphs import OnnxCharModel

    direct = parser.direct_parser
    processor = direct.tagger if network == "tagger" else direct.depparse
    charmodel, vocab = processor.trainer.model.charmodel, processor.vocab["char"]
    words = ["snowboarders", "a", "dog", "Ñandú", "jumping"]
    ids = [vocab.map(list(w)) for w in words]
    order = sorted(range(len(words)), key=lambda i: -len(ids[i]))  # packed: longest first
    chars = torch.zeros(len(words), len(ids[order[0]]), dtype=torch.long)
    for row, i in enumerate(order):
        chars[row, : len(ids[i])] = torch.tensor(ids[i])
    with torch.inference_mode():
        theirs = charmodel(chars, chars == 0, order, [len(words)], [len(ids[i]) for i in order])
        got = torch.from_numpy(OnnxCharModel(charmodel)(ids))
    assert got.shape == (len(words), charmodel.charlstm.lstm.hidden_size)
    torch.testing.assert_close(got, theirs[0], atol=1e-5, rtol=1e-4)


def test_the_few_words_lemmatizer_gives_stanzas_lemmas(parser):
    """400 (word, tag) pairs of Flickr8k's caption words, by stanza's ``LemmaProcessor``
    and by :class:`Lemmatizer`; a score of them changed by more than lowercasing."""
    from stanza.models.common.doc import Document

    from groundsearch.model.runtime.parsing.lemmas import Lemmatizer

    lines = (get_settings().flickr8k_dir / "Flickr8k.token.txt").read_text().splitlines()
    words = sorted({w for line in lines[:3000] for w in line.split("\t")[1].split()})
    rng = random.Random(5)
    pairs = [(w, rng.choice(["NOUN", "VERB", "ADJ", "PROPN"])) for w in rng.sample(words, 400)]
    processor = parser.direct_parser.lemmatizer
    assert Lemmatizer.supported(processor)
    lemmatizer = Lemmatizer(processor)
    done = processor.process(Document([[{"id": 1, "text": w, "upos": u}] for w, u in pairs]))
    assert lemmatizer(pairs) == [s.words[0].lemma for s in done.sentences]
    decoded = [w for w, u in pairs if w not in (lemmatizer.predict(w, u), w.lower())]
    assert len(decoded) > 10
