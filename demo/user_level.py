"""Writes the user-level demo CSV (``conf/release/user_level_demo.yaml`` reads it).

Run ``python -m demo.user_level [path]`` (default data/demo/user_level.csv): 3000
patients seen repeatedly in 5 strata x 2 arms (spec user_level_clip.md §5.2-style panel, a few
heavy users), values clamped to [0, 65], true effect 5 in every stratum.
"""

from __future__ import annotations

import sys
from pathlib import Path

from demo import write_csv
from dpcausal.user_level import make_user_level_panel

DEFAULT_PATH = Path("data/demo/user_level.csv")


def write_demo_csv(path: str | Path = DEFAULT_PATH, seed: int = 3) -> Path:
    frame = make_user_level_panel(n_units=3000, n_strata=5, cells_per_unit=3.0, seed=seed)
    return write_csv(frame.assign(unit_id=[f"patient-{u:05d}" for u in frame["unit_id"]]), path)


if __name__ == "__main__":
    print(write_demo_csv(*sys.argv[1:2]))
