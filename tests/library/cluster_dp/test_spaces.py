"""Response space and binning (spec cluster_dp.md §1.1, §2.7)."""

import numpy as np
import pytest

from dpcausal.cluster_dp import ResponseSpace, bin_continuous


def test_space_sorts_and_indexes():
    s = ResponseSpace([3, -1, 0, 3])
    assert s.values.tolist() == [-1.0, 0.0, 3.0] and s.K == 3 and s.B == 3.0 and s.l2sq == 10.0
    assert s.width == 4.0
    np.testing.assert_array_equal(s.index(np.array([3, -1, 0, 0])), [2, 0, 1, 1])
    with pytest.raises(ValueError, match=r"outcome has values outside the response space") as err:
        s.index(np.array([1.25, 5.5, 0]))
    # the message names the public space, never a data value
    assert "1.25" not in str(err.value) and "5.5" not in str(err.value)


def test_nearest_maps_every_outcome_by_a_public_rule():
    """Issue 26 §1: an out-of-space outcome is mapped, never refused: to the nearest value (ties
    to the lower one, infinities to the ends), NaN to the value nearest the middle of Y's range
    (here (-1 + 3) / 2 = 1: nearest 0); or, declared, everything outside Y to one value."""
    s = ResponseSpace([3, -1, 0])
    y = np.array([3, -1, 0, 1.5, 1.6, -7, np.inf, -np.inf, np.nan, 2.0])
    np.testing.assert_array_equal(s.nearest(y), [2, 0, 1, 1, 2, 0, 2, 0, 1, 2])
    np.testing.assert_array_equal(s.nearest(y, 3.0), [2, 0, 1, 2, 2, 2, 2, 2, 2, 2])
    with pytest.raises(ValueError, match="must be a value of the response space"):
        s.nearest(y, 2.0)


@pytest.mark.parametrize(
    "bad, match", [([1], "at least 2 distinct"), ([0, np.nan], "must be finite")]
)
def test_space_refuses_degenerate(bad, match):
    with pytest.raises(ValueError, match=match):
        ResponseSpace(bad)


def test_binning_midpoints_and_clipping():
    edges = np.array([0.0, 1.0, 2.0, 4.0])
    x = np.array([-3.0, 0.0, 0.99, 1.0, 3.9, 4.0, 100.0])
    np.testing.assert_array_equal(bin_continuous(x, edges), [0.5, 0.5, 0.5, 1.5, 3.0, 3.0, 3.0])
    np.testing.assert_array_equal(bin_continuous(x, edges, reps=[0, 1, 2]), [0, 0, 0, 1, 2, 2, 2])
    space = ResponseSpace((edges[:-1] + edges[1:]) / 2)
    space.index(bin_continuous(x, edges))  # binned values lie in the space


@pytest.mark.parametrize(
    "edges, reps, match",
    [
        ([0, 1], None, "strictly increasing"),
        ([0, 2, 1], None, "strictly increasing"),
        ([0, 1, 2], [1], "reps must have"),
    ],
)
def test_binning_refusals(edges, reps, match):
    with pytest.raises(ValueError, match=match):
        bin_continuous([0.5], edges, reps)
