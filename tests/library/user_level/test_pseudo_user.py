"""Pseudo-user post-step (spec §3.6, §4 P13)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpcausal.user_level import clip_user, grid_error, make_user_level_synthetic, pseudo_user

from ._reference import array_digest, load_oracle
from .test_clip_user import GOLDEN_A

ORACLE = load_oracle()


def _naive_scan(n, Gam, U, eps):
    """Loop reference: every integer cap m in [lo, hi], ties to the larger m."""
    ms, Es = [], []
    for g in range(Gam.shape[1]):
        col = Gam[:, g][Gam[:, g] > 0]
        best_m, best_e = None, np.inf
        for m in range(int(col.min()), int(col.max()) + 1):
            e = grid_error(int(n[g]), int(np.minimum(col, m).sum()), m, U, eps)
            if e <= best_e:
                best_m, best_e = m, e
        ms.append(best_m)
        Es.append(best_e)
    return np.array(ms), np.array(Es)


def test_golden_pseudo_user_P14():
    r = clip_user(GOLDEN_A, 1.0, 1.0, protect_min_grid=False)
    p = pseudo_user(r.n, r.Gamma, 1.0, 1.0)
    assert p.E_bar == pytest.approx([1.319444, 1.234064, 1.382716], abs=1e-6)
    assert p.m.tolist() == [5, 5, 4] and p.E_bar_max == pytest.approx(1.382716, abs=1e-6)


@pytest.mark.parametrize("seed,gamma,eps", [(1, 3, 0.1), (2, 6, 0.5), (3, 9, 1.0)])
def test_pseudo_user_properties_P13(seed, gamma, eps):
    A = make_user_level_synthetic(seed, G=10, gamma=gamma)
    r = clip_user(A, 65.0, eps)
    p = pseudo_user(r.n, r.Gamma, 65.0, eps)
    m_ref, e_ref = _naive_scan(r.n, r.Gamma, 65.0, eps)
    assert np.array_equal(p.m, m_ref) and p.E_bar == pytest.approx(e_ref, rel=1e-12)
    assert p.E_bar_max <= r.E * (1 + 1e-12)
    assert np.all(p.E_bar <= r.E_final * (1 + 1e-12))
    G = r.Gamma
    for g in range(G.shape[1]):
        col = G[:, g][G[:, g] > 0]
        assert col.min() <= p.m[g] <= col.max()
    assert np.array_equal(p.Gbar > 0, G > 0)                  # occupancy unchanged
    assert np.array_equal(p.Gbar, np.minimum(G, p.m[None, :]))
    assert np.array_equal(p.c, p.Gbar.sum(0))


def test_sparse_input_supported():
    A = make_user_level_synthetic(4, G=8, gamma=3)
    r = clip_user(A, 65.0, 0.5)
    d = pseudo_user(r.n, r.Gamma, 65.0, 0.5)
    s = pseudo_user(r.n, sp.csr_matrix(r.Gamma), 65.0, 0.5)
    assert np.array_equal(d.m, s.m) and np.array_equal(s.Gbar.toarray(), d.Gbar)


def test_matches_spec_prototype_oracle():
    ref = ORACLE["pseudo_user"]
    A = make_user_level_synthetic(ref["seed"], G=ref["G"], gamma=ref["gamma"])
    for case in ref["cases"]:
        r = clip_user(A, ref["U"], case["eps"])
        assert array_digest(r.Gamma) == case["Gamma"]
        p = pseudo_user(r.n, r.Gamma, ref["U"], case["eps"])
        assert p.E_bar_max == pytest.approx(case["E_bar_max"], rel=1e-12)
        assert p.m.tolist() == case["m"]


def test_refuses_totals_below_retained():
    with pytest.raises(ValueError, match="original totals"):
        pseudo_user(np.array([1, 1, 1]), GOLDEN_A, 1.0, 1.0)
