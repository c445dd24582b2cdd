"""Input conventions of the estimators, after metric-learn's ``check_input`` and preprocessors.

Weakly supervised estimators take *tuples* of points: an array of shape ``(m, k, d)`` (``k = 2``
for pairs, 4 for quadruplets), or an array of shape ``(m, k)`` of keys together with a
``preprocessor`` — an array ``X`` (integer keys: a tuple ``t`` stands for ``X[t]``) or a
callable mapping a 1-D array of keys of any kind (indices, file names, ids) to the points, one
row per key. Supervised estimators and ``transform`` take points of shape ``(n, d)``, or (with a
preprocessor) a 1-D array of keys.

The solvers need a point set and index tuples into it: :func:`canonical_tuples` builds both from
any of the accepted forms in one way — the distinct points of the tuples (``numpy.unique``,
rows) and the tuples as indices into them — so the same tuples given as points or as indices
with a preprocessor produce bit-identical problems and results.
"""
from __future__ import annotations

import numbers

import numpy as np

from cvxmetric._checks import as_data_matrix

__all__ = ["ndim", "check_preprocessor", "points_from", "tuples_from", "shape_error", "tuple_size_error", "canonical_tuples", "pair_labels", "random_source"]

#: Seeds drawn from a ``numpy.random.RandomState`` lie in ``[0, SEED_BOUND)`` (RandomState's own seed range).
SEED_BOUND = 2 ** 32 - 1


def random_source(random_state):
    """What the solvers and the constraint draws take, from scikit-learn's ``random_state``.

    ``None``, an int or a ``numpy.random.Generator`` are returned as given; a
    ``numpy.random.RandomState`` gives one seed drawn from it, so a fit with
    ``RandomState(s)`` is reproducible and advances that RandomState as scikit-learn's estimators do.
    Call it once per ``fit`` and pass its value to every random choice of the fit.
    """
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(SEED_BOUND))
    if random_state is None or isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    raise TypeError(f"random_state must be None, an int, a numpy.random.RandomState or a numpy.random.Generator; "
                    f"got {type(random_state).__name__}")


class _ArrayIndexer:
    """An array preprocessor: indices ``t`` stand for the rows ``X[t]``."""

    def __init__(self, X):
        self.X = as_data_matrix(X, "preprocessor")

    def __call__(self, indices):
        return self.X[indices]


def check_preprocessor(preprocessor):
    """``None``, a callable, or an array turned into a row indexer (metric-learn's convention)."""
    if preprocessor is None or callable(preprocessor):
        return preprocessor
    try:
        return _ArrayIndexer(preprocessor)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"preprocessor must be None, an array of points (n, d) or a callable mapping indices "
                         f"to points; got {type(preprocessor).__name__} ({exc})") from exc


def _keys(arr: np.ndarray, preprocessor, name: str) -> np.ndarray:
    """The keys handed to ``preprocessor``: integer row indices for an array preprocessor; any keys
    (file names, ids, indices) for a callable, which receives them as given."""
    if not isinstance(preprocessor, _ArrayIndexer):
        return arr
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} with an array preprocessor must hold integer row indices; got dtype {arr.dtype} "
                        "(a callable preprocessor takes any keys)")
    return arr.astype(np.int64)


def ndim(X) -> int:
    """Dimensions of array-like input (its ``ndim``, else that of ``numpy.asarray``; never ``numpy.ndim``,
    which array-likes that refuse ``__array_function__`` reject)."""
    n = getattr(X, "ndim", None)
    return int(n) if n is not None else np.asarray(X).ndim


def shape_error(expected: str, found, estimator, *, extra: str = "", suggest_preprocessor: bool = False) -> ValueError:
    """metric-learn's error for input with the wrong number of dimensions, in its exact wording.

    ``expected``: what was expected ("2D array of formed points", "3D array of formed tuples", or,
    with a preprocessor, "1D array of indicators or 2D array of formed points" /
    "2D array of indicators or 3D array of formed tuples"); ``found``: the array given (printed);
    ``extra``: " when using a preprocessor" or " after the preprocessor has been applied";
    ``suggest_preprocessor``: the data could be keys, so the fix names a preprocessor. Code
    written for metric-learn may match the message, so it is kept word for word, e.g.
    ``"3D array of formed tuples expected by ITML. Found 2D array instead:\ninput=[...]. Reshape
    your data and/or use a preprocessor.\n"``.
    """
    found = np.asarray(found)
    context = "" if estimator is None else f" by {type(estimator).__name__}"
    suggestion = " and/or use a preprocessor" if suggest_preprocessor else ""
    return ValueError(f"{expected} expected{context}{extra}. Found {found.ndim}D array instead:\ninput={found}. "
                      f"Reshape your data{suggestion}.\n")


#: The ``extra`` phrases of :func:`shape_error`.
_WITH_PREPROCESSOR = " when using a preprocessor"
_AFTER_PREPROCESSOR = " after the preprocessor has been applied"


def points_from(X, preprocessor, name: str = "X", estimator=None) -> np.ndarray:
    """Points ``(n, d)``: ``X`` itself, or, with a preprocessor, the points of a 1-D index array.

    Input of another number of dimensions raises metric-learn's :func:`shape_error`.
    """
    arr = np.asarray(X)
    if arr.ndim == 1 and preprocessor is not None:
        pts = np.asarray(preprocessor(_keys(arr, preprocessor, name)))
        if pts.ndim != 2:
            raise shape_error("2D array of formed points", pts, estimator, extra=_AFTER_PREPROCESSOR,
                              suggest_preprocessor=True)
        return as_data_matrix(pts, name)
    if arr.ndim == 1:
        raise shape_error("2D array of formed points", arr, estimator, suggest_preprocessor=True)
    if arr.ndim != 2 and preprocessor is not None:
        raise shape_error("1D array of indicators or 2D array of formed points", arr, estimator,
                          extra=_WITH_PREPROCESSOR)
    if arr.ndim != 2:
        raise shape_error("2D array of formed points", arr, estimator)
    return as_data_matrix(X, name)


def tuple_size_error(tuples: np.ndarray, size: int, estimator) -> ValueError:
    """metric-learn's error for tuples of another size than ``size``, in its exact wording."""
    context = "" if estimator is None else f" by {type(estimator).__name__}"
    return ValueError(f"Tuples of {size} element(s) expected{context}. Got tuples of {tuples.shape[1]} element(s) "
                      f"instead (shape={tuples.shape}):\ninput={tuples}.\n")


def tuples_from(tuples, size: int, preprocessor, name: str, estimator=None) -> np.ndarray:
    """Tuples as points, shape ``(m, size, d)``, from points or from indices and a preprocessor.

    Input of another number of dimensions raises metric-learn's :func:`shape_error`, tuples of
    another size its :func:`tuple_size_error` (``estimator`` names the estimator there).
    """
    arr = np.asarray(tuples)
    if arr.ndim == 2 and preprocessor is not None:
        if arr.shape[1] != size:
            raise tuple_size_error(arr, size, estimator)
        idx = _keys(arr, preprocessor, name)
        pts = np.asarray(preprocessor(idx.reshape(-1)), dtype=np.float64)
        if pts.ndim != 2:
            raise shape_error("3D array of formed tuples", pts, estimator, extra=_AFTER_PREPROCESSOR,
                              suggest_preprocessor=True)
        if pts.shape[0] != idx.size:
            raise ValueError(f"the preprocessor must map {idx.size} indices to {idx.size} points (an array of shape "
                             f"({idx.size}, d)); got shape {pts.shape}")
        arr = pts.reshape(idx.shape[0], size, pts.shape[1])
    elif arr.ndim == 2:
        raise shape_error("3D array of formed tuples", arr, estimator, suggest_preprocessor=True)
    elif arr.ndim != 3 and preprocessor is not None:
        raise shape_error("2D array of indicators or 3D array of formed tuples", arr, estimator,
                          extra=_WITH_PREPROCESSOR)
    elif arr.ndim != 3:
        raise shape_error("3D array of formed tuples", arr, estimator)
    if arr.shape[1] != size:
        raise tuple_size_error(arr, size, estimator)
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty; give at least one tuple of {size} points")
    flat = as_data_matrix(arr.reshape(-1, arr.shape[2]), name)
    return flat.reshape(arr.shape)


def canonical_tuples(tuples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, idx)``: the distinct points of ``tuples`` (m, k, d) and the tuples as row indices of ``X``."""
    m, k, d = tuples.shape
    X, inverse = np.unique(tuples.reshape(-1, d), axis=0, return_inverse=True)
    return X, inverse.reshape(m, k).astype(np.int64)


def pair_labels(y, m: int) -> np.ndarray:
    """Pair labels as a bool array (True: similar), from +1 / -1 labels (metric-learn's convention)."""
    arr = np.asarray(y)
    if arr.shape != (m,):
        raise ValueError(f"y must have one label per pair, shape ({m},); got {arr.shape}")
    if arr.dtype.kind not in "iuf" or not np.all(np.isin(arr, (-1, 1))):
        # metric-learn's wording, kept word for word (code written for metric-learn may match it)
        raise ValueError("When training on pairs, the labels (y) should contain only values in [-1, 1]. "
                         "Found an incorrect value.")
    return arr == 1
