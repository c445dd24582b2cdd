"""Validation of ``fit(X, y)`` for the supervised estimators (scikit-learn conventions)."""
from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from ._base import _validate_data
from ._inputs import check_preprocessor, ndim, points_from

__all__ = ["points_and_labels"]


def points_and_labels(est, X, y) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` validated (``n_features_in_`` set); ``X`` may be 1-D indices with a preprocessor."""
    pre = check_preprocessor(est.preprocessor)
    if ndim(X) != 2:
        X = points_from(X, pre, estimator=est)     # keys with a preprocessor; else metric-learn's error
        est.n_features_in_ = X.shape[1]
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have one label per point, shape ({X.shape[0]},); got {y.shape}")
    else:
        X, y = _validate_data(est, X, y, dtype=np.float64, ensure_min_samples=2)
    check_classification_targets(y)
    return X, y
