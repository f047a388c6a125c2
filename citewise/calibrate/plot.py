"""The calibration plot: refusal rate against threshold, one line per bucket, the chosen
threshold marked. Drawn with matplotlib's Agg backend (no display needed); matplotlib is the
``plot`` extra, imported only here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from citewise.answer.learned import LearnedModel
from citewise.calibrate.calibration import Calibration, Observation, PolicyResult, values
from citewise.calibrate.querysets import BUCKETS
from citewise.errors import ConfigError

if TYPE_CHECKING:  # matplotlib is the plot extra, imported only when a plot is drawn
    from matplotlib.axes import Axes

COLOURS = {"covered": "#1b7837", "thin": "#e08214", "out_of_scope": "#762a83"}


def curves(observations: Sequence[Observation], policy: str, points: int = 301,
           model: LearnedModel | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Thresholds spanning the observed values, and each bucket's refusal rate at each."""
    v = values(observations, policy, model)
    finite = v[np.isfinite(v)]
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    pad = max(0.02, (hi - lo) * 0.05)
    grid = np.linspace(lo - pad, hi + pad, points)
    buckets = [b for b in BUCKETS if any(o.bucket == b for o in observations)]
    buckets += sorted({o.bucket for o in observations} - set(buckets))
    rates = {}
    for b in buckets:
        mine = v[[o.bucket == b for o in observations]]
        rates[b] = (mine[None, :] < grid[:, None]).mean(axis=1)
    return grid, rates


def _panel(ax: Axes, observations: Sequence[Observation], result: PolicyResult,
           max_covered_refusal: float, chosen: bool) -> None:
    grid, rates = curves(observations, result.policy, model=result.model)
    for bucket, r in rates.items():
        n = sum(o.bucket == bucket for o in observations)
        ax.step(grid, r * 100, where="post", lw=2, color=COLOURS.get(bucket),
                label=f"{bucket.replace('_', ' ')} (n={n})")
    ax.axvline(result.threshold, color="black", ls="--", lw=1)
    ax.axhline(max_covered_refusal * 100, color=COLOURS["covered"], ls=":", lw=1)
    ax.annotate(
        f"{'chosen' if chosen else 'its own'} threshold {result.threshold:.3f}",
        xy=(result.threshold, 50), xytext=(6, 0), textcoords="offset points", rotation=90,
        va="center", fontsize=9,
    )
    ax.set_xlabel(f"threshold on {result.policy}")
    ax.set_ylabel("refused (%)")
    ax.set_ylim(-3, 103)
    ax.set_title(f"{result.policy}: mean refusal of refuse buckets {result.score:.0%}, "
                 f"AUC {result.auc:.3f}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=9,
              frameon=False)


def plot(observations: Sequence[Observation], result: Calibration, path: Path,
         title: str = "") -> Path:
    """Write the plot to ``path`` (PNG); beside the chosen policy, top1 as the baseline."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'citewise[plot]'") from None
    panels = [result.chosen]
    baseline = next((p for p in result.compared if p.policy == "top1"), None)
    if baseline is not None and baseline is not result.chosen:
        panels.append(baseline)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 5.0), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        _panel(ax, observations, panel, result.max_covered_refusal, panel is result.chosen)
    fig.suptitle(title or f"Refusal rate against threshold ({result.n} labelled questions; "
                 f"dotted: {result.max_covered_refusal:.0%} covered refusal allowed)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
