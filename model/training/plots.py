"""Training curves: per-epoch train loss and dev rsum of a training summary, as a PNG
(matplotlib's Agg canvas, never pyplot)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from groundsearch.common.files import atomic_path


class SummaryError(ValueError):
    """A training summary that cannot be read or plotted, with the reason."""


def _numbers(history: dict, key: str) -> list[float]:
    values = history.get(key)
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise SummaryError(f"history[{key!r}] must be a list of numbers, got {values!r:.60}")
    return [float(v) for v in values]


def check_history(history: object) -> tuple[list[float], list[float]]:
    """Per-epoch ``(loss, dev_rsum)`` of a summary's ``history``; SummaryError if malformed."""
    if not isinstance(history, dict):
        raise SummaryError(f"history must be an object, got {type(history).__name__}")
    loss, rsum = _numbers(history, "loss"), _numbers(history, "dev_rsum")
    if not loss:
        raise SummaryError("history has no epochs")
    if len(loss) != len(rsum):
        raise SummaryError(f"history has {len(loss)} losses but {len(rsum)} dev rsums")
    return loss, rsum


def best_epoch_of(dev_rsum: list[float]) -> int | None:
    """1-based epoch of the highest dev rsum (the first on ties, as training keeps it)."""
    finite = [(r, -e) for e, r in enumerate(dev_rsum, 1) if math.isfinite(r)]
    return -max(finite)[1] if finite else None


def load_summary(path: Path) -> dict:
    """A training summary JSON (the ``.json`` beside a checkpoint), checked for plotting."""
    path = Path(path)
    hint = " (give the .json written beside the checkpoint)" if path.suffix == ".pt" else ""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SummaryError(f"training summary not found: {path}") from None
    except IsADirectoryError:
        raise SummaryError(f"{path} is a folder, not a training summary") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SummaryError(f"{path} is not a JSON training summary{hint} ({exc})") from None
    if not isinstance(summary, dict) or "history" not in summary:
        raise SummaryError(f"{path} is not a training summary: it has no 'history'{hint}")
    try:
        check_history(summary["history"])
    except SummaryError as exc:
        raise SummaryError(f"{path}: {exc}") from None
    return summary


def plot_history(
    history: dict,
    path: Path,
    title: str,
    best_epoch: int | None = None,
    ensemble_rsum: float | None = None,
) -> None:
    """Write a PNG of a summary's ``history`` loss and dev rsum per epoch to ``path``
    (atomically), marking the best epoch (1-based) and the ensemble's dev rsum."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    loss, rsum = check_history(history)
    epochs = list(range(1, len(loss) + 1))
    if best_epoch is None or not 1 <= best_epoch <= len(epochs):
        best_epoch = best_epoch_of(rsum)

    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax2 = ax.twinx()
    handles = ax.plot(epochs, loss, "o-", color="tab:blue", label="train loss")
    handles += ax2.plot(epochs, rsum, "s-", color="tab:orange", label="dev rsum")
    if best_epoch is not None:
        best = rsum[best_epoch - 1]
        ax.axvline(best_epoch, color="grey", linestyle="--", linewidth=1)
        label = f"best: epoch {best_epoch}, rsum {best:.1f}"
        handles += ax2.plot([best_epoch], [best], "*", color="tab:red", markersize=14, label=label)
    if ensemble_rsum is not None:
        label = f"snapshot ensemble: rsum {ensemble_rsum:.1f}"
        handles.append(ax2.axhline(ensemble_rsum, color="tab:green", linestyle=":", label=label))
    ax.set_xlabel("epoch")
    ax.set_ylabel("train loss", color="tab:blue")
    ax2.set_ylabel("dev rsum (R@1+5+10, both directions)", color="tab:orange")
    ax.tick_params(axis="y", colors="tab:blue")
    ax2.tick_params(axis="y", colors="tab:orange")
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="center right", fontsize="small")
    ax.set_title(title)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", dpi=120)  # the temp name has no .png suffix
