"""Named default problem instances, shared by tests, the CLI, notebooks and benchmarks.

An :class:`Instance` bundles data, a constraint set and the model's hyper-parameters under a
stable name. Each method registers its instances in a module of this package (``qwise.py``,
``lmnn.py``, ...), discovered automatically, so adding a method never edits this file.
Factories are called lazily and every random choice in them is seeded, so an instance name
always means the same numbers. Every factory takes an instance ``seed`` (default 0): seed 0 is
the documented default instance, and ``seed = s`` regenerates every random choice of the factory
from seeds shifted by :func:`shifted_seed` (the report's ``--seed S``), so the same instance
*recipe* can be verified on other draws. Deterministic instances (a whole bundled data set)
ignore it.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._checks import check_bool
from ..constraints import ConstraintSet

__all__ = ["Instance", "register", "get_instance", "list_instances", "shifted_seed", "SEED_STRIDE"]

#: Instance seed s shifts every internal seed b of a factory to b + SEED_STRIDE * s: seeds of
#: different instances (all below 1000) never collide across instance seeds.
SEED_STRIDE = 1000


def shifted_seed(base: int, seed: int) -> int:
    """The internal seed ``base`` of a factory under the instance seed ``seed``."""
    return int(base) + SEED_STRIDE * int(seed)


@dataclass(frozen=True, eq=False)
class Instance:
    """A named problem instance.

    Attributes
    ----------
    method : str
        Method name (``"qwise"``, ``"lmnn"``, ...).
    name : str
        Instance name, unique within the method.
    X : ndarray, shape (n, d)
        Data.
    constraints : ConstraintSet or None
        The supervision (None for methods that build their own from ``y``).
    params : dict
        Model hyper-parameters, passed to the formulation builder and the fast solvers.
    y : ndarray or None
        Labels, when the instance comes from a labelled data set.
    description : str
        One line for reports.
    extra : dict
        Anything else a method needs (a target metric, a split, ...).
    seed : int
        The instance seed it was generated with (0: the default instance).
    """

    method: str
    name: str
    X: np.ndarray
    constraints: ConstraintSet | None
    params: dict = field(default_factory=dict)
    y: np.ndarray | None = None
    description: str = ""
    extra: dict = field(default_factory=dict)
    seed: int = 0

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_constraints(self) -> int | None:
        return None if self.constraints is None else len(self.constraints)


_REGISTRY: dict[str, dict[str, tuple[Callable[[], Instance], bool]]] = {}
_CACHE: dict[tuple[str, str], Instance] = {}
_LOADED = False


def register(method: str, name: str, *, default: bool = True):
    """Decorator registering a factory ``factory(seed: int = 0) -> Instance``.

    ``default=False`` keeps an instance out of the default report (e.g. benchmark sizes).
    """
    default = check_bool(default, "default")

    def deco(factory: Callable[..., Instance]):
        if "seed" not in inspect.signature(factory).parameters:
            raise TypeError(f"instance factory {method}/{name} must take a 'seed' argument "
                            f"(use shifted_seed(base, seed) for its random choices)")
        _REGISTRY.setdefault(method, {})[name] = (factory, default)
        return factory
    return deco


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    _LOADED = True


def list_instances(method: str | None = None, *, default_only: bool = False) -> dict[str, list[str]] | list[str]:
    """Names of registered instances (of one method, or a dict for all methods)."""
    default_only = check_bool(default_only, "default_only")
    _load_all()

    def names(m):
        return [k for k, (_, dflt) in _REGISTRY.get(m, {}).items() if dflt or not default_only]
    if method is None:
        return {m: names(m) for m in _REGISTRY}
    if method not in _REGISTRY:
        raise ValueError(f"no instances for method {method!r}; known methods: {sorted(_REGISTRY)}")
    return names(method)


def get_instance(method: str, name: str, seed: int = 0) -> Instance:
    """The instance ``name`` of ``method`` drawn with instance ``seed`` (built once, then cached)."""
    _load_all()
    if method not in _REGISTRY:
        raise ValueError(f"no instances for method {method!r}; known methods: {sorted(_REGISTRY)}")
    if name not in _REGISTRY[method]:
        raise ValueError(f"unknown instance {name!r} for {method}; choose one of {sorted(_REGISTRY[method])}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    key = (method, name, int(seed))
    if key not in _CACHE:
        inst = dataclasses.replace(_REGISTRY[method][name][0](seed=int(seed)), seed=int(seed))
        inst.X.setflags(write=False)
        _CACHE[key] = inst
    return _CACHE[key]
