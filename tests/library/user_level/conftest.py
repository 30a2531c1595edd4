"""Fixtures of the user-level tests: two record panels and a noise source that records every
draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcausal.user_level import make_user_level_panel
from tests.library._frames import user_panel


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    """400 units in 4 strata, 4 cells each, with the generator's column names."""
    return make_user_level_panel(n_units=400, n_strata=4, cells_per_unit=4, seed=3)


@pytest.fixture(scope="module")
def panel() -> pd.DataFrame:
    """300 users in 3 strata (columns ``user``, ``s``, ``arm``, ``ts``, ``y``)."""
    return user_panel()


class RecordingGenerator(np.random.Generator):
    """A numpy Generator that counts its draws (the exact samplers draw through ``integers``;
    any other use shows as a changed state)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(np.random.PCG64(seed))
        self._start = self.bit_generator.state
        self.calls = 0

    def integers(self, *args, **kwargs):
        self.calls += 1
        return super().integers(*args, **kwargs)

    @property
    def draws(self) -> int:
        return max(self.calls, int(self.bit_generator.state != self._start))


@pytest.fixture
def noise_source(monkeypatch):
    """The release noise source (``secure_rng``) replaced by a recording generator; tests also
    pass it as ``random_state`` so a path seeding from it is recorded too."""
    gen = RecordingGenerator()
    monkeypatch.setattr("dpcausal.user_level.release.secure_rng", lambda: gen, raising=False)
    return gen
