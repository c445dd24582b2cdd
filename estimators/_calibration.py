"""The decision threshold of a pair classifier, chosen on labelled pairs (metric-learn's strategies).

A pair is predicted similar when its learned distance is at most the threshold ``t``. Only the
distinct distances of the validation pairs (each one accepts every pair at most that far) and one
value below them all (accepting none) give different predictions, so the best threshold is found
by scoring each of these candidates from cumulative counts of true and false positives.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["STRATEGIES", "check_calibration_params", "best_threshold"]

#: The calibration strategies (metric-learn's names).
STRATEGIES = ("accuracy", "f_beta", "max_tpr", "max_tnr")


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, np.bool_)


def check_calibration_params(strategy, min_rate, beta) -> None:
    """Raise ValueError, naming the parameter, unless the strategy and its parameter are valid.

    ``min_rate`` (``"max_tpr"``, ``"max_tnr"``) must be a number in [0, 1]; ``beta``
    (``"f_beta"``) a real number (it enters squared, so its sign does not matter). The messages
    are metric-learn's, word for word (code written for metric-learn may match them).
    """
    if strategy not in STRATEGIES:
        raise ValueError('Strategy can either be "accuracy", "f_beta" or "max_tpr" or "max_tnr". '
                         f'Got "{strategy}" instead.')
    if strategy in ("max_tpr", "max_tnr") and not (_is_real(min_rate) and 0.0 <= min_rate <= 1.0):
        raise ValueError(f"Parameter min_rate must be a number in[0, 1]. Got {min_rate} instead.")
    if strategy == "f_beta" and not _is_real(beta):
        raise ValueError(f"Parameter beta must be a real number. Got {type(beta)} instead.")


def _ratio(num: np.ndarray, den) -> np.ndarray:
    """``num / den`` with 0 where ``den`` is 0 (a rate or precision over nothing counts as 0)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.broadcast_to(np.asarray(den, dtype=np.float64), num.shape)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def best_threshold(distances: np.ndarray, similar: np.ndarray, strategy: str = "accuracy",
                   min_rate=None, beta: float = 1.0) -> float:
    r"""The distance threshold that maximises ``strategy`` on pairs at ``distances`` with labels ``similar``.

    Parameters
    ----------
    distances : ndarray, shape (m,)
        Learned distances of the validation pairs.
    similar : ndarray of bool, shape (m,)
        True for a similar (+1) pair.
    strategy : {"accuracy", "f_beta", "max_tpr", "max_tnr"}
    min_rate : float in [0, 1]
        ``"max_tpr"``: the least true negative rate; ``"max_tnr"``: the least true positive rate.
    beta : float
        ``"f_beta"``: the weight of recall.

    Returns
    -------
    float
        The threshold: a validation distance, or the least one minus 1 when accepting no pair is best.

    Notes
    -----
    With :math:`TP(t), FP(t)` the similar and dissimilar pairs at distance at most :math:`t`,
    :math:`P, N` the similar and dissimilar pairs, the strategies maximise over the candidates

    * ``"accuracy"``: :math:`(TP + N - FP) / (P + N)`; ties: the smallest threshold;
    * ``"f_beta"``: :math:`(1 + \beta^2)\,\mathrm{prec}\cdot\mathrm{rec} / (\beta^2\,\mathrm{prec} + \mathrm{rec})`
      with :math:`\mathrm{prec} = TP / (TP + FP)`, :math:`\mathrm{rec} = TP / P` (0 where undefined);
      ties: the largest threshold (the highest recall);
    * ``"max_tpr"``: :math:`TP / P` subject to :math:`(N - FP) / N \ge` ``min_rate``; ties: the
      smallest threshold (the highest true negative rate);
    * ``"max_tnr"``: :math:`(N - FP) / N` subject to :math:`TP / P \ge` ``min_rate``; ties: the
      largest threshold (the highest true positive rate).

    A rate over no pair counts as 0 (metric-learn's convention), so ``min_rate=0`` is always met.
    """
    check_calibration_params(strategy, min_rate, beta)
    order = np.argsort(distances, kind="stable")
    d, s = np.asarray(distances, dtype=np.float64)[order], np.asarray(similar, dtype=bool)[order]
    last_of_value = np.r_[d[1:] != d[:-1], True]             # a candidate accepts every tie at its value
    candidates = np.r_[d[0] - 1.0, d[last_of_value]]
    tp = np.r_[0, np.cumsum(s)[last_of_value]]
    fp = np.r_[0, np.cumsum(~s)[last_of_value]]
    P, N = int(s.sum()), int((~s).sum())
    tpr = _ratio(tp, P)
    tnr = _ratio(N - fp, N)
    if strategy == "accuracy":
        return float(candidates[np.argmax(tp + N - fp)])
    if strategy == "f_beta":
        precision, b2 = _ratio(tp, tp + fp), float(beta) ** 2
        f = _ratio((1.0 + b2) * precision * tpr, b2 * precision + tpr)
        return float(candidates[_last_argmax(f)])
    if strategy == "max_tpr":
        feasible = tnr >= min_rate
        return float(candidates[np.argmax(np.where(feasible, tpr, -1.0))])
    feasible = tpr >= min_rate
    return float(candidates[_last_argmax(np.where(feasible, tnr, -1.0))])


def _last_argmax(values: np.ndarray) -> int:
    """The last index of the maximum of ``values``."""
    return int(values.size - 1 - np.argmax(values[::-1]))
