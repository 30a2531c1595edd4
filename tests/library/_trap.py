"""A noise trap and a recording accountant, for tests of "no draw before the charge" and "one
charge per release" (fixture ``accountant`` in ``conftest.py``).

The trap replaces the samplers of :mod:`dpcausal.noise` (the OS-entropy generator and the exact
samplers) wherever a ``dpcausal`` module holds them, so a module split or a new import is
trapped too; the accountant opens it only while its release draws.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dpcausal import noise, session
from dpcausal.accounting import PrivacyCharge

#: every way the library draws a release's noise (dpcausal/noise.py)
SAMPLERS = ("secure_rng", "sample_discrete_laplace", "sample_discrete_gaussian",
            "laplace_mechanism", "gaussian_mechanism", "gaussian_vector_mechanism")


class NoiseDrawn(AssertionError):
    """A noise sampler ran outside the accountant's release (or before a refusal)."""


class Refused(Exception):
    """The accountant refused the charge (as a ledger past its cap): nothing may be drawn."""


class Trap:
    """The samplers of :mod:`dpcausal.noise`, replaced wherever a ``dpcausal`` module holds
    them: each call while not ``open`` raises :class:`NoiseDrawn` (and is counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = False
        self.hits = 0
        modules = [m for k, m in list(sys.modules.items()) if k.split(".")[0] == "dpcausal"]
        for name in SAMPLERS:
            real = getattr(noise, name)
            guarded = self._guard(name, real)
            for module in modules:
                if getattr(module, name, None) is real:
                    monkeypatch.setattr(module, name, guarded)

    def _guard(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not self.open:
                self.hits += 1
                raise NoiseDrawn(f"{name} called outside the accountant's release")
            return real(*args, **kwargs)
        return guarded

    @contextmanager
    def opened(self) -> Iterator[None]:
        """Draws allowed within the block (e.g. to build a test's inputs)."""
        self.open = True
        try:
            yield
        finally:
            self.open = False


class Recording:
    """An accountant (:class:`dpcausal.session.Accountant`) that records each charge, then
    refuses it (``refuse``) or runs the release with the trap open."""

    def __init__(self, trap: Trap, refuse: bool = False) -> None:
        self.trap = trap
        self.refuse = refuse
        self.charges: list[PrivacyCharge] = []

    def release(self, mechanism: Any, prepared: Any, charge: PrivacyCharge, *,
                evaluation: bool = False, draw: Callable[[], Any] | None = None) -> Any:
        self.charges.append(charge)
        if self.refuse:
            raise Refused
        with self.trap.opened():
            return session._draw_of(mechanism, prepared, evaluation, draw)()


def vector_noise(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """The noise ``module``'s ``gaussian_vector_mechanism`` adds, one array per call, recorded
    at the sampler (for the tests of a release path's noise scale)."""
    import numpy as np

    real = module.gaussian_vector_mechanism
    seen: list[Any] = []

    def recording(values: Any, sigma: float, sensitivity: float, rng: Any) -> Any:
        out = real(values, sigma, sensitivity, rng)
        seen.append(out - np.asarray(values))
        return out

    monkeypatch.setattr(module, "gaussian_vector_mechanism", recording)
    return seen
