"""Fixtures shared by the library tier."""

from __future__ import annotations

import pytest

from dpcausal import session
from tests.library._trap import Recording, Trap


@pytest.fixture
def accountant(monkeypatch):
    """A recording accountant (``_trap.Recording``) installed for the test, with every noise
    sampler trapped outside its releases."""
    acc = Recording(Trap(monkeypatch))
    with session.charging_to(acc):
        yield acc
