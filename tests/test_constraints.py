"""The unified constraint set (design §4)."""
import numpy as np
import pytest

from cvxmetric import ConstraintSet


def test_kinds_are_derived_from_indices():
    sim = ConstraintSet.from_pairs([[0, 1], [2, 3]], similar=True, bound=2.0)
    dis = ConstraintSet.from_pairs([[0, 2]], similar=False, bound=5.0)
    trip = ConstraintSet.from_triplets([[0, 1, 2]], delta=1.0)
    quad = ConstraintSet.from_quadruplets([[0, 1, 2, 3]], delta=0.5, weight=2.0)
    cs = sim + dis + trip + quad
    assert len(cs) == 5
    np.testing.assert_array_equal(cs.is_similar, [True, True, False, False, False])
    np.testing.assert_array_equal(cs.is_dissimilar, [False, False, True, False, False])
    np.testing.assert_array_equal(cs.is_relative, [False, False, False, True, True])
    np.testing.assert_array_equal(cs.idx[0], [0, 1, 0, 0])
    np.testing.assert_array_equal(cs.idx[2], [0, 0, 0, 2])
    np.testing.assert_array_equal(cs.idx[3], [0, 1, 0, 2])
    np.testing.assert_allclose(cs.delta, [-2, -2, 5, 1, 0.5])
    np.testing.assert_allclose(cs.weight, [1, 1, 1, 1, 2])


def test_pairs_encode_their_bounds_as_hinges():
    """similar: [D - u]_+ ; dissimilar: [l - D]_+ (design §4)."""
    from cvxmetric.hinge import QuadrupletGeometry

    X = np.array([[0.0, 0.0], [3.0, 4.0]])
    M = np.eye(2)
    sim = ConstraintSet.from_pairs([[0, 1]], similar=True, bound=10.0)
    dis = ConstraintSet.from_pairs([[0, 1]], similar=False, bound=30.0)
    for cs, expected in ((sim, 25 - 10), (dis, 30 - 25)):
        g = QuadrupletGeometry(X, cs)
        assert cs.delta[0] + g.values(M)[0] == pytest.approx(expected)


def test_arrays_are_read_only_and_inputs_not_modified():
    q = np.array([[0, 1, 2, 3]])
    cs = ConstraintSet.from_quadruplets(q)
    with pytest.raises(ValueError):
        cs.idx[0, 0] = 5
    q[0, 0] = 7
    assert cs.idx[0, 0] == 0


def test_subset_and_with_weight():
    cs = ConstraintSet.from_quadruplets([[0, 1, 2, 3], [1, 2, 3, 0]], delta=[1.0, 2.0])
    sub = cs.subset(np.array([False, True]))
    assert len(sub) == 1 and sub.delta[0] == 2.0
    assert np.all(cs.with_weight(3.0).weight == 3.0)


@pytest.mark.parametrize("build, exc, match", [
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2]]), ValueError, "shape"),
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2, 3.5]]), TypeError, "integer"),
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2, -1]]), ValueError, "non-negative"),
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2, 3]], weight=-1.0), ValueError, "weight"),
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2, 3]], delta=np.nan), ValueError, "delta"),
    (lambda: ConstraintSet.from_quadruplets([[0, 1, 2, 3]], delta=[1.0, 2.0]), ValueError, "delta"),
    (lambda: ConstraintSet.from_quadruplets([[1, 1, 2, 2]]), ValueError, "zero-length"),
    (lambda: ConstraintSet.from_pairs([[1, 1]], similar=True, bound=1.0), ValueError, "itself"),
    (lambda: ConstraintSet.concatenate(), ValueError, "at least one"),
    (lambda: ConstraintSet.concatenate([1, 2]), TypeError, "ConstraintSet"),
])
def test_bad_input(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_validate_against_data():
    cs = ConstraintSet.from_quadruplets([[0, 1, 2, 9]])
    with pytest.raises(ValueError, match="n = 5"):
        cs.validate(5)
    assert cs.validate(10) is cs
    empty = ConstraintSet.from_quadruplets(np.zeros((0, 4), dtype=int))
    with pytest.raises(ValueError, match="empty"):
        empty.validate(3)


def test_index_arrays_from_text_files_and_readable_messages():
    """Whole-number floats (indices read from a CSV) are accepted; messages show plain tuples."""
    a = ConstraintSet.from_triplets(np.array([[0.0, 1.0, 2.0]]))
    np.testing.assert_array_equal(a.idx, [[0, 1, 0, 2]])
    assert a.idx.dtype == np.int32
    with pytest.raises(ValueError, match=r"constraint 0 = \(0, 1, 0, 9\) indexes a row >= n = 5"):
        a.from_triplets([[0, 1, 9]]).validate(5)
    with pytest.raises(ValueError, match=r"pair 0 = \(2, 2\)"):
        ConstraintSet.from_pairs(np.array([[2, 2]]), similar=False, bound=1.0)
    with pytest.raises(TypeError, match="similar must be True or False"):
        ConstraintSet.from_pairs([[0, 1]], similar=1, bound=1.0)
