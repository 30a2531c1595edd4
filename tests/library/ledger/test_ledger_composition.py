"""Accounting: GDP <-> (epsilon, delta) against spec §1.3's table, mixed compositions against
``dp_accounting`` directly (PLD and RDP accountants) and a hand-written exact reference."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger.composition import (
    Cap,
    admissible,
    compose,
    group_privacy,
    headroom,
    within_cap,
)


def gauss(z: float) -> PrivacyCharge:
    return PrivacyCharge("gaussian", zeta=z)


def lap(e: float) -> PrivacyCharge:
    return PrivacyCharge("laplace", epsilon=e)


ORDERS = tuple(float(a) for a in np.concatenate([np.linspace(1.25, 10, 36), np.arange(11, 129)]))


# ---------------------------------------------------------------- Gaussian only: exact GDP
@pytest.mark.parametrize("zetas, zeta_total, epsilon", [
    ([0.5], 0.5, 1.9931),
    ([1.0], 1.0, 4.3772),
    ([1.5 / math.sqrt(2)], 1.0607, 4.6867),
    ([1.5], 1.5, 7.0514),
    ([1.5, 0.5], 1.5811, 7.5113),  # spec §1.3 row sqrt(1.5^2 + 0.5^2)
    ([1.5, 1.5, 1.5], 2.598, None),  # spec §2.6: G, IPW and AIPW at 1.5 each
])
def test_gaussian_composition_matches_spec_table(zetas, zeta_total, epsilon) -> None:
    spend = compose([gauss(z) for z in zetas], delta=1e-5)
    assert spend.method == "gdp"
    assert spend.zeta == pytest.approx(zeta_total, abs=6e-4)
    assert spend.rho == pytest.approx(zeta_total**2 / 2, abs=2e-3)
    if epsilon is not None:
        assert spend.epsilon == pytest.approx(epsilon, abs=6e-5)


def test_epsilon_delta_cap_boundary_for_gaussian() -> None:
    # zeta = 1.5 is (7.0514, 1e-5)-DP (spec §1.3): a cap 1e-4 above admits it, 1e-4 below refuses
    assert within_cap([gauss(1.5)], Cap("epsilon", 7.0515, 1e-5))[0]
    assert not within_cap([gauss(1.5)], Cap("epsilon", 7.0513, 1e-5))[0]
    # the same cap with a smaller delta is stricter
    assert not within_cap([gauss(1.5)], Cap("epsilon", 7.0515, 1e-6))[0]


@pytest.mark.parametrize("cap, admitted", [
    (Cap("zeta", 2.0), 4),  # sqrt(4 * 1^2) = 2 exactly: the 4th fits, the 5th does not
    (Cap("rho", 2.5), 5),  # zeta = sqrt(5): five charges of zeta=1 fit exactly
    (Cap("rho", 2.4999999999), 4),
    (Cap("zeta", 2.3), 5),
])
def test_gdp_and_zcdp_caps_are_exact(cap: Cap, admitted: int) -> None:
    fits = [within_cap([gauss(1.0)] * k, cap)[0] for k in range(1, 8)]
    assert fits == [k <= admitted for k in range(1, 8)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-3, 5.0), min_size=1, max_size=12), st.floats(1e-2, 20.0))
def test_gdp_cap_decision_is_exact_and_headroom_never_generous(zetas, cap_zeta) -> None:
    cap = Cap("zeta", cap_zeta)
    charges = [gauss(z) for z in zetas]
    squares = Fraction(0)
    for z in zetas:  # hand reference: exact rational sum of squares
        squares += Fraction(z) * Fraction(z)
    assert within_cap(charges, cap)[0] == (squares <= Fraction(cap_zeta) ** 2)
    left = headroom(charges, cap)
    assert left["next_zeta"] >= 0 and left["next_epsilon"] >= 0
    assert left["next_pure_epsilon"] is None  # a GDP cap admits no pure charge
    if squares <= Fraction(cap_zeta) ** 2:
        assert compose(charges).zeta ** 2 + left["next_zeta"] ** 2 <= cap_zeta**2 * (1 + 1e-15)
        if left["next_zeta"] > 0:
            assert within_cap([*charges, gauss(left["next_zeta"])], cap)[0]
    else:
        assert left == {"next_zeta": 0.0, "next_epsilon": 0.0, "next_pure_epsilon": None}


def test_headroom_is_what_one_more_release_could_spend() -> None:
    """Issue 21: cap eps minus spent eps is no release's spend; report one more release's."""
    # zeta cap 2.5 with zeta 2 spent: one more Gaussian of zeta 1.5 = (7.0514, 1e-5), spec §1.3
    left = headroom([gauss(2.0)], Cap("zeta", 2.5))
    assert left["next_zeta"] == pytest.approx(1.5, rel=1e-8) and left["next_zeta"] <= 1.5
    assert left["next_epsilon"] == pytest.approx(7.0514, abs=6e-5)
    # rho cap 2 with eps=1 pure spent (rho 0.5): 1.5 left, so zeta = eps = sqrt(3)
    left = headroom([lap(1.0)], Cap("rho", 2.0))
    assert left["next_zeta"] == pytest.approx(math.sqrt(3), rel=1e-8)
    assert left["next_pure_epsilon"] == pytest.approx(math.sqrt(3), rel=1e-8)
    # (7.0514, 1e-5) cap, nothing spent: zeta 1.5 again, to the bisection's tolerance
    left = headroom([], Cap("epsilon", 7.0514, 1e-5))
    assert 1.5 * (1 - 1e-4) <= left["next_zeta"] <= 1.5 * (1 + 1e-4)


@pytest.mark.parametrize("charges, cap", [
    ([PrivacyCharge("pure", epsilon=1.0)], Cap("epsilon", 3.0, 1e-5)),
    ([gauss(1.0), lap(0.5)], Cap("epsilon", 6.0, 1e-6)),
    ([PrivacyCharge("approx", epsilon=0.5, delta=1e-6)], Cap("epsilon", 2.0, 1e-5)),
])
def test_headroom_under_an_epsilon_cap_is_admitted_and_tight(charges, cap) -> None:
    left = headroom(charges, cap)
    for key, make in (("next_zeta", gauss), ("next_pure_epsilon",
                                             lambda e: PrivacyCharge("pure", epsilon=e))):
        value = left[key]
        assert value > 0
        assert within_cap([*charges, make(value)], cap)[0]
        assert not within_cap([*charges, make(value * 1.001)], cap)[0]


# ---------------------------------------------------------------- mixed: PLD
@pytest.mark.parametrize("delta", [1e-5, 1e-7])
def test_gaussian_and_laplace_match_dp_accounting_pld(delta: float) -> None:
    acc = PLDAccountant(value_discretization_interval=1e-3)
    for event in (dp_event.GaussianDpEvent(1 / 1.2), dp_event.LaplaceDpEvent(1 / 0.5),
                  dp_event.LaplaceDpEvent(1 / 0.5), dp_event.LaplaceDpEvent(1 / 0.3)):
        acc.compose(event)
    spend = compose([gauss(1.2), lap(0.5), lap(0.5), lap(0.3)], delta=delta)
    assert spend.method == "pld" and spend.zeta is None and spend.delta == delta
    assert spend.epsilon == pytest.approx(acc.get_epsilon(delta), rel=1e-6)
    assert spend.epsilon < 1.3 + gauss_eps_at(1.2, delta)  # better than basic composition


def gauss_eps_at(zeta: float, delta: float) -> float:
    return compose([gauss(zeta)], delta).epsilon


def _exact_pure_composition_epsilon(eps: float, k: int, delta: float) -> float:
    """Hand reference: k-fold composition of eps-DP (randomized response is the worst case).

    The privacy loss is a sum of k independent +-eps steps (+eps w.p. e^eps/(1+e^eps));
    delta(e') = sum_j P(j ups) * max(0, 1 - exp(e' - L_j)); bisection for delta(e') = delta.
    """
    p = math.exp(eps) / (1 + math.exp(eps))

    def delta_at(e: float) -> float:
        total = 0.0
        for j in range(k + 1):
            loss = (2 * j - k) * eps
            total += math.comb(k, j) * p**j * (1 - p) ** (k - j) * max(0.0, 1 - math.exp(e - loss))
        return total

    lo, hi = 0.0, k * eps
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return hi


def test_pure_charges_against_exact_randomized_response_composition() -> None:
    exact = _exact_pure_composition_epsilon(0.4, 10, 1e-5)
    spend = compose([PrivacyCharge("pure", epsilon=0.4)] * 10, delta=1e-5)
    assert exact < 4.0  # the exact figure beats basic composition...
    assert exact <= spend.epsilon <= exact + 2e-3  # ...and the ledger is an upper bound, tight


def test_approx_charge_adds_its_delta() -> None:
    # one (1, 1e-6) charge composed with itself: its deltas count against the dataset delta
    two = compose([PrivacyCharge("approx", epsilon=1.0, delta=1e-6)] * 2, delta=1e-5)
    assert 1.0 < two.epsilon <= 2.0 + 1e-3
    assert math.isinf(compose([PrivacyCharge("approx", epsilon=1.0, delta=1e-5)] * 2,
                              delta=1e-5).epsilon)


def test_mixed_cap_boundary_catches_undercounting() -> None:
    charges = [gauss(1.0), lap(1.0)]
    acc = PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_event.GaussianDpEvent(1.0))
    acc.compose(dp_event.LaplaceDpEvent(1.0))
    reference = acc.get_epsilon(1e-5)
    assert within_cap(charges, Cap("epsilon", reference * 1.001, 1e-5))[0]
    assert not within_cap(charges, Cap("epsilon", reference * 0.999, 1e-5))[0]


# ---------------------------------------------------------------- GDP / zCDP caps, mixed
def test_pure_laplace_charge_is_not_admitted_under_a_gdp_cap_by_its_epsilon() -> None:
    """1-GDP is (4.377, 1e-5)-DP, so comparing as epsilon at one delta admitted a pure eps=4.3
    Laplace charge; a GDP cap is a promise about the whole tradeoff curve."""
    assert not within_cap([lap(4.3)], Cap("zeta", 1.0))[0]
    assert not within_cap([gauss(0.1), lap(0.01)], Cap("zeta", 1.0))[0]
    assert admissible(lap(0.01), Cap("zeta", 1.0)) is not None
    assert admissible(gauss(0.5), Cap("zeta", 1.0)) is None


def test_zcdp_cap_admits_pure_charges_as_half_epsilon_squared() -> None:
    """Bun & Steinke (2016) Prop. 1.4: eps-DP => eps^2/2-zCDP; Gaussian zeta => zeta^2/2-zCDP."""
    assert not within_cap([lap(4.3)], Cap("rho", 9.2))[0]  # 4.3^2 / 2 = 9.245
    assert within_cap([lap(4.3)], Cap("rho", 9.2451))[0]
    # 1.0^2/2 + 1.2^2/2 + 0.6^2/2 = 1.4 exactly (in the stored floats' rationals)
    charges = [gauss(1.0), lap(1.2), PrivacyCharge("pure", epsilon=0.6)]
    exact = sum(Fraction(v) ** 2 for v in (1.0, 1.2, 0.6)) / 2
    assert within_cap(charges, Cap("rho", float(exact) * (1 + 1e-12)))[0]
    assert not within_cap(charges, Cap("rho", float(exact) * (1 - 1e-12)))[0]
    assert compose(charges).rho == pytest.approx(1.4, rel=1e-8)  # rounded up by 1e-9
    assert compose(charges).zeta is None  # not a GDP figure any more


@pytest.mark.parametrize("charge", [
    PrivacyCharge("approx", epsilon=0.1, delta=1e-9),
    PrivacyCharge("rdp", rdp_orders=(2.0, 4.0), rdp_epsilons=(0.01, 0.02)),
])
def test_charges_without_a_zcdp_bound_are_refused_under_gdp_and_zcdp_caps(charge) -> None:
    for cap in (Cap("zeta", 10.0), Cap("rho", 50.0)):
        assert admissible(charge, cap) is not None
        assert not within_cap([charge], cap)[0]
    assert admissible(charge, Cap("epsilon", 10.0, 1e-5)) is None


def test_headroom_is_zero_when_an_old_charge_is_no_longer_admitted() -> None:
    """A schema-1 ledger may hold a Laplace charge under a zeta cap: nothing more is admitted."""
    assert headroom([lap(0.1)], Cap("zeta", 5.0)) == {
        "next_zeta": 0.0, "next_epsilon": 0.0, "next_pure_epsilon": None}
    rdp = PrivacyCharge("rdp", rdp_orders=(2.0,), rdp_epsilons=(0.1,))
    assert headroom([rdp], Cap("rho", 5.0))["next_pure_epsilon"] == 0.0


def test_group_privacy_is_the_explicit_unit_conversion() -> None:
    """k rows per user: hand values (Gaussian/Laplace exact, approx by Vadhan Lemma 2.2)."""
    assert group_privacy(gauss(0.4), 3).zeta == pytest.approx(1.2)
    assert group_privacy(lap(0.5), 3) == PrivacyCharge("laplace", epsilon=1.5)
    out = group_privacy(PrivacyCharge("approx", epsilon=0.5, delta=1e-7), 2)
    assert (out.epsilon, out.delta) == (1.0, pytest.approx(2 * math.exp(0.5) * 1e-7))
    assert out.detail["group_privacy_k"] == 2
    assert group_privacy(lap(0.5), 1) == lap(0.5)
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            group_privacy(lap(0.5), bad)
    with pytest.raises(ValueError, match="an rdp charge has no group-privacy conversion"):
        group_privacy(_gaussian_curve(1.0), 2)


# ---------------------------------------------------------------- with RDP curves
def _gaussian_curve(zeta: float, orders=ORDERS) -> PrivacyCharge:
    return PrivacyCharge("rdp", rdp_orders=tuple(orders),
                         rdp_epsilons=tuple(a * zeta**2 / 2 for a in orders))


def test_rdp_curve_with_gaussian_and_laplace_matches_rdp_accountant() -> None:
    acc = rdp_acc.RdpAccountant(orders=[a for a in ORDERS if a > 1])
    for event in (dp_event.GaussianDpEvent(1.0), dp_event.LaplaceDpEvent(1.0),
                  dp_event.GaussianDpEvent(2.0)):
        acc.compose(event)
    spend = compose([gauss(1.0), lap(1.0), _gaussian_curve(0.5)], delta=1e-5)
    assert spend.method == "rdp"
    assert spend.epsilon == pytest.approx(acc.get_epsilon(1e-5), rel=1e-8)


def test_rdp_with_approx_uses_basic_composition_for_the_approx_part() -> None:
    acc = rdp_acc.RdpAccountant(orders=[a for a in ORDERS if a > 1])
    acc.compose(dp_event.GaussianDpEvent(1.0))
    spend = compose([_gaussian_curve(1.0), PrivacyCharge("approx", epsilon=0.3, delta=4e-6)],
                    delta=1e-5)
    assert spend.epsilon == pytest.approx(acc.get_epsilon(6e-6) + 0.3, rel=1e-8)


def test_rdp_curves_on_different_orders_are_read_conservatively() -> None:
    a = PrivacyCharge("rdp", rdp_orders=(2.0, 4.0, 8.0), rdp_epsilons=(0.2, 0.4, 0.8))
    b = PrivacyCharge("rdp", rdp_orders=(6.0, 3.0), rdp_epsilons=(0.6, 0.3))
    # hand reference on the union grid: each curve at the next order it knows, +inf beyond
    grid = [2.0, 3.0, 4.0, 6.0, 8.0]
    total = [0.2 + 0.3, 0.4 + 0.3, 0.4 + 0.6, 0.8 + 0.6, math.inf]
    expected, _ = rdp_acc.compute_epsilon(grid, total, 1e-5)
    assert compose([a, b], delta=1e-5).epsilon == pytest.approx(expected, rel=1e-8)


def test_laplace_rdp_formula_matches_dp_accounting() -> None:
    # pure-Laplace composed through the RDP path (forced by a zero curve) vs RdpAccountant
    zero = PrivacyCharge("rdp", rdp_orders=ORDERS, rdp_epsilons=(0.0,) * len(ORDERS))
    acc = rdp_acc.RdpAccountant(orders=[a for a in ORDERS if a > 1])
    acc.compose(dp_event.LaplaceDpEvent(1 / 0.05), count=100)
    spend = compose([zero] + [lap(0.05)] * 100, delta=1e-6)
    assert acc.get_epsilon(1e-6) < 100 * 0.05  # RDP beats basic composition here
    assert spend.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-8)


def test_pure_charge_in_rdp_path_uses_max_divergence_and_zcdp_bounds() -> None:
    zero = PrivacyCharge("rdp", rdp_orders=ORDERS, rdp_epsilons=(0.0,) * len(ORDERS))
    spend = compose([zero] + [PrivacyCharge("pure", epsilon=0.5)] * 4, delta=1e-5)
    # hand reference: each eps-DP charge has D_alpha <= min(eps, alpha eps^2 / 2)
    grid = [a for a in ORDERS if a > 1]
    curve = [4 * min(0.5, a * 0.5**2 / 2) for a in grid]
    via_rdp, _ = rdp_acc.compute_epsilon(grid, curve, 1e-5)
    assert via_rdp > 2.0  # here RDP is worse than basic composition, so the ledger adds eps
    assert spend.epsilon == pytest.approx(2.0, rel=1e-8)
    zcdp_only = rdp_acc.RdpAccountant(orders=grid)
    zcdp_only.compose(dp_event.ZCDpEvent(rho=0.5**2 / 2), count=4)
    assert spend.epsilon < zcdp_only.get_epsilon(1e-5)
