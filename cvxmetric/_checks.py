"""Input validation shared by every layer.

Every public entry point of the project checks its inputs with these helpers, so that bad
input fails early with a message that names the argument and says how to fix it. None of
the helpers modifies its input: they return validated *copies* (or read-only views of
fresh arrays) where a conversion is needed.
"""
from __future__ import annotations

import numbers

import numpy as np

from .tolerances import SYMMETRY_RTOL

__all__ = [
    "as_data_matrix",
    "as_square_symmetric",
    "as_labels",
    "as_rng",
    "check_positive",
    "check_nonnegative",
    "check_int_in_range",
]


def as_data_matrix(X, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
    """Return ``X`` as a finite float64 array of shape (n, d), copying it.

    Raises
    ------
    TypeError
        If ``X`` cannot be read as a numeric array.
    ValueError
        If ``X`` is not 2-D, has fewer than ``min_rows`` rows, zero columns, or holds NaN/inf.
    """
    try:
        arr = np.array(X, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array of shape (n, d); got {type(X).__name__}") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n, d); got an array with shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has d = 0 features; give at least one column")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} has {arr.shape[0]} rows; at least {min_rows} are needed")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]}); "
            "remove or impute non-finite values first"
        )
    return arr


def as_square_symmetric(M, name: str = "M", *, d: int | None = None, psd: bool = False,
                        psd_tol: float | None = None) -> np.ndarray:
    """Return ``M`` as a finite symmetric float64 (d, d) array (exactly symmetrized copy).

    ``M`` must be symmetric to a relative tolerance of ``SYMMETRY_RTOL``; the returned copy is
    ``(M + M.T) / 2``. With ``psd=True`` the smallest eigenvalue must be at least
    ``-psd_tol * max(1, ||M||_2)``.
    """
    try:
        arr = np.array(M, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric square matrix; got {type(M).__name__}") from exc
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d}, {d}) to match the data; got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (d = 0); give at least a 1 x 1 matrix")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; pass a finite matrix")
    scale = max(1.0, float(np.max(np.abs(arr))))
    asym = float(np.max(np.abs(arr - arr.T)))
    if asym > SYMMETRY_RTOL * scale:
        raise ValueError(
            f"{name} is not symmetric (max |{name} - {name}.T| = {asym:.3g}); "
            f"pass a symmetric matrix, e.g. ({name} + {name}.T) / 2"
        )
    arr = 0.5 * (arr + arr.T)
    if psd:
        from .tolerances import PSD_INPUT_TOL

        tol = PSD_INPUT_TOL if psd_tol is None else psd_tol
        lam_min = float(np.linalg.eigvalsh(arr)[0])
        if lam_min < -tol * max(1.0, float(np.linalg.norm(arr, 2))):
            raise ValueError(
                f"{name} is not positive semidefinite (smallest eigenvalue {lam_min:.3g}); "
                f"project it first, e.g. with cvxmetric.project_psd({name})"
            )
    return arr


def as_labels(y, n: int, name: str = "y") -> np.ndarray:
    """Return class labels as a 1-D array of length ``n`` (copy)."""
    arr = np.array(y, copy=True)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D with one label per row of X; got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but X has {n} rows; give one label per row")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf labels")
    return arr


def as_rng(seed) -> np.random.Generator:
    """Turn ``None``, an int seed or a Generator into a ``numpy.random.Generator``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (numbers.Integral, np.integer)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be None, an int or a numpy.random.Generator; got {type(seed).__name__}")


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float, checking it is finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite; got {value}")
    if allow_zero and v < 0:
        raise ValueError(f"{name} must be >= 0; got {value}")
    if not allow_zero and v <= 0:
        raise ValueError(f"{name} must be > 0; got {value}")
    return v


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as float, checking it is finite and >= 0."""
    return check_positive(value, name, allow_zero=True)


def check_int_in_range(value, name: str, low: int, high: int) -> int:
    """Return ``value`` as int, checking ``low <= value <= high``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    v = int(value)
    if not low <= v <= high:
        raise ValueError(f"{name} must be in [{low}, {high}]; got {v}")
    return v
