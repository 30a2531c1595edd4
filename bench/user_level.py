"""Benchmark: Clip-User planning and release at 100,000 units x 200 cells (issue 11).

Sparse occupancy (about 10 cells per unit, 100 strata x 2 arms). Prints data generation, planning
and release wall times, the plan's figures and peak memory (the process's max RSS from
``resource.getrusage``; tracemalloc is not used because it slows the Python planning loop ~3x).
Target on 2 cores: under 30 s and under 2 GB.

Run: ``.venv/bin/python bench/user_level.py [--units 100000] [--strata 100] [--cells-per-unit 10]``
"""

from __future__ import annotations

import argparse
import resource
import time

from dpcausal.user_level import UserLevelATE, make_user_level_panel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--strata", type=int, default=100)
    ap.add_argument("--cells-per-unit", type=float, default=10.0)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    records = make_user_level_panel(n_units=args.units, n_strata=args.strata,
                                    cells_per_unit=args.cells_per_unit, seed=args.seed)
    t1 = time.perf_counter()
    rel = UserLevelATE(outcome_bounds=(0.0, 65.0), epsilon=args.epsilon, clip="clip_user",
                           random_state=args.seed)
    plan = rel.plan(records, unit="unit_id", cell=["stratum", "arm"], order="ts")
    t2 = time.perf_counter()
    out = rel._release(records, value="y", plan=plan)
    t3 = time.perf_counter()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    occ = plan.cells  # public per-cell figures
    print(f"units {plan.n_units:,}  cells {plan.n_cells}  records {plan.n_records:,}  "
          f"non-zeros of A ~{int((records.groupby(['unit_id', 'stratum', 'arm']).ngroups)):,}")
    print(f"generate  {t1 - t0:7.2f} s")
    print(f"plan      {t2 - t1:7.2f} s   (Clip-User stages {plan.stages}, "
          f"suppressions {plan.n_suppressions:,})")
    print(f"release   {t3 - t2:7.2f} s")
    print(f"plan+release {t3 - t1:7.2f} s")
    print(f"peak memory (max RSS of the process, incl. data generation) {rss_mb:8.1f} MiB")
    print(f"G1 {plan.G1}  K {plan.K}  eps_total {plan.epsilon_total:g}  "
          f"eps_parallel {plan.epsilon_parallel:g}  eps_naive {plan.epsilon_naive:g}")
    print(f"error baseline {plan.error_baseline:.3f}  after Clip-User {plan.error_after_clip:.3f}"
          f"  after pseudo-user {plan.error:.3f}")
    print(f"records retained {plan.n_retained / plan.n_records:.1%}; "
          f"max cell suppression {(1 - occ['c'] / occ['n']).max():.1%}")
    print(f"pooled ATE {out.ate_pooled['ate']:.3f} (SE {out.ate_pooled['se']:.3f})")


if __name__ == "__main__":
    main()
