"""The max-margin ranking objective of Socher et al. (2014), Eq. 5, in both directions.

For a batch of matching pairs (row ``i`` of ``images`` goes with row ``i`` of
``sentences``), every other row is a contrastive example:

    J = Σ_i Σ_{c≠i} max(0, Δ − v_iᵀy_i + v_iᵀy_c) + max(0, Δ − v_iᵀy_i + v_cᵀy_i)

``hardest=True`` keeps only the largest violation per row and direction (VSE++); rows of
the same image are no negatives. Also CLIP's ``contrastive_loss``, ``distillation_loss``
(Hinton et al. 2015) and Table 2's ``squared_loss``.
"""

from __future__ import annotations

import torch

#: The objectives ``TrainConfig.loss`` can name.
LOSSES = ("margin", "contrastive", "squared")


def _check_pairs(images: torch.Tensor, sentences: torch.Tensor) -> None:
    if images.shape != sentences.shape or images.ndim != 2:
        raise ValueError(
            f"images {tuple(images.shape)} and sentences "
            f"{tuple(sentences.shape)} must be the same (batch × dim) shape"
        )


def _check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError(f"the temperature must be > 0, got {temperature}")


def squared_loss(images: torch.Tensor, sentences: torch.Tensor) -> torch.Tensor:
    """``Σ_i ‖v_i − y_i‖²`` over the batch (Socher et al. 2014, Table 2's squared loss)."""
    _check_pairs(images, sentences)
    return (images - sentences).pow(2).sum()


def ranking_loss(
    images: torch.Tensor,
    sentences: torch.Tensor,
    margin: float = 3.0,
    hardest: bool = False,
    image_ids: torch.Tensor | None = None,
    fitting: torch.Tensor | None = None,
) -> torch.Tensor:
    """Eq. 5 summed over the batch (without the λ‖θ‖² term; use weight decay for that);
    ``fitting`` (images × sentences): pairs of other photos that are no negatives."""
    _check_pairs(images, sentences)
    scores = images @ sentences.T  # scores[i, c] = v_iᵀ y_c
    correct = scores.diagonal()
    if image_ids is None:
        same = torch.eye(len(scores), dtype=torch.bool, device=scores.device)
    else:
        same = image_ids[:, None] == image_ids[None, :]
    if fitting is not None:
        same = same | fitting
    # describing images: image i ranks sentences c; image search: sentence i ranks images c
    cost_s = (margin - correct[:, None] + scores).clamp(min=0).masked_fill(same, 0)
    cost_i = (margin - correct[None, :] + scores).clamp(min=0).masked_fill(same, 0)
    if hardest:
        return cost_s.max(dim=1).values.sum() + cost_i.max(dim=0).values.sum()
    return cost_s.sum() + cost_i.sum()


def contrastive_loss(
    images: torch.Tensor,
    sentences: torch.Tensor,
    temperature: float = 0.05,
    image_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """InfoNCE both ways, summed over the batch: ``−log softmax(v_iᵀy / τ)_i`` for each image
    and ``−log softmax(vᵀy_i / τ)_i`` for each sentence; other captions of the same image
    are left out of the softmax rather than counted as negatives."""
    _check_pairs(images, sentences)
    _check_temperature(temperature)
    scores = images @ sentences.T / temperature
    if image_ids is not None:
        others = image_ids[:, None] == image_ids[None, :]
        others.fill_diagonal_(False)
        scores = scores.masked_fill(others, float("-inf"))
    rows = torch.arange(len(scores), device=scores.device)
    ce = torch.nn.functional.cross_entropy
    return ce(scores, rows, reduction="sum") + ce(scores.T, rows, reduction="sum")


def distillation_loss(
    scores: torch.Tensor, teacher: torch.Tensor, temperature: float = 0.05
) -> torch.Tensor:
    """``KL(softmax(T / τ) ‖ softmax(S / τ))`` of each row (an image over the batch's
    captions) and each column (a caption over its images), summed over the batch; ``scores``
    and ``teacher`` are (images × captions) of the same batch."""
    if scores.shape != teacher.shape or scores.ndim != 2:
        raise ValueError(
            f"scores {tuple(scores.shape)} and the teacher's {tuple(teacher.shape)} must be "
            "the same (images × captions) shape"
        )
    _check_temperature(temperature)
    kl = torch.nn.functional.kl_div
    total = scores.new_zeros(())
    for s, t in ((scores, teacher), (scores.T, teacher.T)):
        log_s = torch.log_softmax(s / temperature, dim=1)
        log_t = torch.log_softmax(t / temperature, dim=1)
        total = total + kl(log_s, log_t, reduction="sum", log_target=True)
    return total
