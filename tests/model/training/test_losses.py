"""Eq. 5 and InfoNCE on a three-pair example computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from groundsearch.model.training.losses import contrastive_loss, ranking_loss, squared_loss

# v_i (images) and y_i (sentences), two dimensions, three pairs.
V = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
Y = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
# scores S[i, c] = v_i·y_c:
#   [[2, 0, 1],
#    [0, 1, 0],
#    [2, 1, 1]]   diagonal 2, 1, 1; margin Δ = 1.
# describing (image i, sentence c≠i): max(0, 1 − S_ii + S_ic)
#   i=0: c=1 → 1−2+0 = −1 → 0, c=2 → 1−2+1 = 0        → 0
#   i=1: c=0 → 1−1+0 = 0,     c=2 → 1−1+0 = 0        → 0
#   i=2: c=0 → 1−1+2 = 2,     c=1 → 1−1+1 = 1        → 3
# search (sentence j, image c≠j): max(0, 1 − S_jj + S_cj)
#   j=0: c=1 → 1−2+0 = −1 → 0, c=2 → 1−2+2 = 1        → 1
#   j=1: c=0 → 1−1+0 = 0,     c=2 → 1−1+1 = 1        → 1
#   j=2: c=0 → 1−1+1 = 1,     c=1 → 1−1+0 = 0        → 1
# total 3 + 3 = 6; hardest: describing 0+0+2, search 1+1+1 → 5


def test_eq5_by_hand():
    assert ranking_loss(V, Y, margin=1.0).item() == pytest.approx(6.0)


def test_hardest_negative_by_hand():
    assert ranking_loss(V, Y, margin=1.0, hardest=True).item() == pytest.approx(5.0)


def test_captions_of_the_same_image_are_not_negatives():
    ids = torch.tensor([0, 1, 0])  # rows 0 and 2 show the same image
    # removes (i=0,c=2)=0, (i=2,c=0)=2, (j=0,c=2)=1, (j=2,c=0)=1 → 6 − 4 = 2
    assert ranking_loss(V, Y, margin=1.0, image_ids=ids).item() == pytest.approx(2.0)


def test_gradient_flows_to_both_sides():
    v, y = V.clone().requires_grad_(), Y.clone().requires_grad_()
    ranking_loss(v, y, margin=1.0).backward()
    assert v.grad.abs().sum() > 0 and y.grad.abs().sum() > 0


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match="same"):
        ranking_loss(V, Y[:2])


def test_squared_loss_by_hand():
    # ‖v − y‖²: (1−2)² + 0 = 1; 0; (1−1)² + (1−0)² = 1 → 2
    assert squared_loss(V, Y).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="same"):
        squared_loss(V, Y[:2])


def _nll(row: list[float], target: int) -> float:
    return -(row[target] - math.log(sum(math.exp(x) for x in row)))


def test_contrastive_loss_by_hand():
    # S as above, τ = 1: images rank the rows of S, sentences its columns
    rows = [[2, 0, 1], [0, 1, 0], [2, 1, 1]]
    cols = [[2, 0, 2], [0, 1, 1], [1, 0, 1]]
    expected = sum(_nll(r, i) for i, r in enumerate(rows)) + sum(
        _nll(c, i) for i, c in enumerate(cols)
    )
    assert contrastive_loss(V, Y, temperature=1.0).item() == pytest.approx(expected, rel=1e-6)
    # τ = 0.5 doubles every score
    doubled = sum(_nll([2 * x for x in r], i) for i, r in enumerate(rows)) + sum(
        _nll([2 * x for x in c], i) for i, c in enumerate(cols)
    )
    assert contrastive_loss(V, Y, temperature=0.5).item() == pytest.approx(doubled, rel=1e-6)


def test_contrastive_leaves_other_captions_of_an_image_out():
    ids = torch.tensor([0, 1, 0])  # rows 0 and 2 show the same image
    rows = [[2, 0], [0, 1, 0], [1, 1]]  # (0, 2) and (2, 0) left out; targets 0, 1, 1
    cols = [[2, 0], [0, 1, 1], [0, 1]]
    expected = (
        _nll(rows[0], 0)
        + _nll(rows[1], 1)
        + _nll(rows[2], 1)
        + _nll(cols[0], 0)
        + _nll(cols[1], 1)
        + _nll(cols[2], 1)
    )
    got = contrastive_loss(V, Y, temperature=1.0, image_ids=ids).item()
    assert got == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        contrastive_loss(V, Y, temperature=0.0)


def test_distillation_is_zero_at_the_teacher_and_pulls_towards_it():
    from groundsearch.model.training.losses import distillation_loss

    torch.manual_seed(0)
    teacher = torch.randn(6, 6) * 0.3
    assert distillation_loss(teacher.clone(), teacher).item() == pytest.approx(0, abs=1e-5)
    scores = torch.zeros(6, 6, requires_grad=True)
    before = distillation_loss(scores, teacher, temperature=0.1)
    before.backward()
    with torch.no_grad():
        after = distillation_loss(scores - 0.01 * scores.grad, teacher, temperature=0.1)
    assert before.item() > 0 and after.item() < before.item()
    with pytest.raises(ValueError, match="same"):
        distillation_loss(torch.zeros(3, 4), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="temperature"):
        distillation_loss(teacher, teacher, temperature=0)
