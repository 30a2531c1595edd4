"""Writes the randomized trial that ``conf/release/trial_dim.yaml`` reads (issue 33 §6).

Run ``python -m demo.trial [path]`` (default data/demo/trial.csv): ``n`` participants (default
2,000) assigned to treatment by a fair coin, independently of everything else (the design the
config declares: ``randomized``); covariates ``age`` in [18, 80], ``score`` in [0, 10] and
``site`` in {0, 1}; a binary outcome with P(outcome = 1) = expit(-0.4 + 0.5 treated
+ 0.02 (age - 49) + 0.15 (score - 5)), so the true ATE is about 0.12.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from demo import write_csv

DEFAULT_PATH = Path("data/demo/trial.csv")
TRIAL_SEED = 33


def trial_frame(n: int = 2000, seed: int = TRIAL_SEED) -> pd.DataFrame:
    """One randomized trial: treated (fair coin), outcome (0/1), age, score, site."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 80, n).round()
    score = rng.uniform(0, 10, n).round(1)
    site = rng.integers(0, 2, n)
    treated = rng.integers(0, 2, n)
    logit = -0.4 + 0.5 * treated + 0.02 * (age - 49) + 0.15 * (score - 5)
    outcome = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return pd.DataFrame({"treated": treated, "outcome": outcome, "age": age, "score": score,
                         "site": site})


def write_trial_csv(path: str | Path = DEFAULT_PATH, n: int = 2000, seed: int = TRIAL_SEED
                    ) -> Path:
    return write_csv(trial_frame(n, seed), path)


if __name__ == "__main__":
    print(write_trial_csv(*sys.argv[1:2]))
