"""Accountant values: spec §1.3 table, §5 item 6; cross-checked against dp_accounting."""

import math

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcausal.accounting import (
    PrivacyCharge,
    compose_gdp,
    gdp_delta,
    gdp_epsilon,
    gdp_rdp,
    gdp_to_zcdp,
    gdp_zeta_for,
    zcdp_to_gdp,
)


@pytest.mark.parametrize("zeta, eps", [(0.5, 1.9931), (1.0, 4.3772), (1.5 / math.sqrt(2), 4.6867),
                                       (1.5, 7.0514), (math.sqrt(2.5), 7.5113)])
def test_epsilon_table_of_spec(zeta, eps):
    assert gdp_epsilon(zeta, 1e-5) == pytest.approx(eps, abs=2e-4)


def test_delta_at_paper_epsilon():
    assert gdp_delta(7.05, 1.5) == pytest.approx(1.004e-5, rel=1e-3)


@pytest.mark.parametrize("zeta, delta", [(0.5, 1e-5), (1.5, 1e-5), (3.0, 1e-8)])
def test_epsilon_matches_dp_accounting_pld(zeta, delta):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / zeta))
    assert gdp_epsilon(zeta, delta) == pytest.approx(acc.get_epsilon(delta), rel=2e-3)


def test_composition_matches_dp_accounting():
    zetas = [1.5, 0.5, 0.8]
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    for z in zetas:
        acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / z))
    assert compose_gdp(zetas) == pytest.approx(math.sqrt(1.5**2 + 0.5**2 + 0.8**2))
    assert gdp_epsilon(compose_gdp(zetas), 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=2e-3)


def test_rdp_and_zcdp_match_dp_accounting():
    orders = [1.5, 2.0, 8.0, 32.0]
    acc = rdp_privacy_accountant.RdpAccountant(orders)
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1 / 1.5))
    for order, rdp in zip(orders, acc._rdp, strict=True):
        assert gdp_rdp(1.5, order) == pytest.approx(rdp, rel=1e-12)
    assert gdp_to_zcdp(1.5) == pytest.approx(1.125)
    assert zcdp_to_gdp(1.125) == pytest.approx(1.5)


def test_broken_conversion_is_caught():
    """Negative control: a conversion that understates zeta by 20% misses the reference."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1 / 1.5))
    assert gdp_epsilon(0.8 * 1.5, 1e-5) != pytest.approx(acc.get_epsilon(1e-5), rel=1e-2)


@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_composition_is_monotone_and_nonnegative(zetas):
    total = compose_gdp(zetas)
    assert total >= 0
    assert total + 1e-12 >= max(zetas)
    assert compose_gdp(zetas + [0.1]) >= total


@given(st.floats(0.05, 5.0), st.sampled_from([1e-3, 1e-5, 1e-9]))
@settings(max_examples=60, deadline=None)
def test_zeta_for_inverts_epsilon(zeta, delta):
    eps = gdp_epsilon(zeta, delta)
    if eps > 0:
        assert gdp_zeta_for(eps, delta) == pytest.approx(zeta, rel=1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_zeta_refused(bad):
    with pytest.raises(ValueError, match="zeta must be a finite number > 0"):
        gdp_epsilon(bad)


def test_privacy_charge_validates():
    with pytest.raises(ValueError, match="gaussian charge needs zeta"):
        PrivacyCharge("gaussian")
    with pytest.raises(ValueError, match="mechanism must be one of"):
        PrivacyCharge("exponential", epsilon=1.0)
