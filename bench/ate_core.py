"""Benchmark of the core release at scale (issue 19 §2): the old default K = 500 against the
planner's K, side by side, in one run.

Data: ``dpcausal.datasets.make_large`` (d = 5, outcome in [0, 1]); AIPW with LogisticRegression
propensity and LinearRegression outcomes, eta = 0.2, zeta = 1, evaluation mode (so that the
non-private CI of the same fit can be shown). Each configuration runs in its own fresh process,
so "peak RSS" is that configuration's own peak (data included). Columns:

- K, and the planner's predicted seconds for it;
- fit: fold assignment and the fold fits; agg+noise: aggregation, scores and the noise draw
  (wall seconds); cpu: CPU seconds of both (all threads), which the other helpers' load on the
  shared cores inflates less than the wall time (load: the 1-minute load average);
- ratio: private 95% CI half-width / non-private one (1.96 sqrt(V_hat)) of the same fit, for this
  noise draw and as expected from the calibration at that V_hat (``planner.expected_halfwidth``).

    .venv/bin/python bench/ate_core.py [n ...]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import time

CONFIGS = {
    "K=500 (old default)": dict(n_folds=500, sigma2="paper", ci_share=0.1),
    "planner (auto)": dict(),
}


def run(n: int, label: str) -> dict:
    from dpcausal import PrivateATE
    from dpcausal.ate.planner import expected_halfwidth, predicted_seconds
    from dpcausal.datasets import make_large

    X, A, Y, _ = make_large(n, 5, random_state=0)
    est = PrivateATE(outcome_bounds=(0, 1), propensity_clip=0.2, zeta=1.0, random_state=0,
                     noise_seed=1, **CONFIGS[label])
    load = os.getloadavg()[0]
    c0 = time.process_time()
    t0 = time.perf_counter()
    Xa, Aa, Ya = est.validate(X, A, Y)
    folds = est.make_folds(n, evaluation=True, d=5)
    models = est.fit_folds(Xa, Aa, Ya, folds)
    t1 = time.perf_counter()
    rel = est._release(Aa, Ya, est.aggregate(Xa, folds, models), evaluation=True, d=5)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    cal = est.calibration(n, 5)
    base = 1.959964 * rel.nonprivate["variance"] ** 0.5
    half = (rel.ci[1] - rel.ci[0]) / 2
    expected = expected_halfwidth(cal.sigma_ate, cal.sigma_var, rel.nonprivate["variance"],
                                  ci=est.ci, alpha=est.alpha, p1=est.p1)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return dict(n=n, label=label, K=cal.n_folds, predicted=predicted_seconds(n, cal.n_folds,
                                                                           "aipw"),
                fit=t1 - t0, agg=t2 - t1, cpu=cpu, rss=rss, ratio=half / base,
                expected=expected / base, sigma2=cal.sigma2_mode,
                share=round(cal.zeta2**2 / cal.zeta**2, 3), ate=rel.nonprivate["ate"],
                load=(load + os.getloadavg()[0]) / 2)


def main(sizes: list[int]) -> None:
    ctx = mp.get_context("spawn")
    print(f"cores: {os.cpu_count()}; load average at start: {os.getloadavg()}")
    print(f"{'n':>9} {'config':<20} {'K':>6} {'sigma2':>6} {'r':>5} {'fit s':>6} "
          f"{'agg+noise s':>11} {'total s':>7} {'cpu s':>6} {'planned s':>9} {'peak RSS MiB':>12} "
          f"{'ratio (draw)':>12} {'ratio (exp.)':>12} {'tau_hat':>8} {'load':>5}")
    for n in sizes:
        for label in CONFIGS:
            with ctx.Pool(1) as pool:
                r = pool.apply(run, (n, label))
            print(f"{r['n']:>9} {r['label']:<20} {r['K']:>6} {r['sigma2']:>6} {r['share']:>5} "
                  f"{r['fit']:>6.1f} {r['agg']:>11.1f} {r['fit'] + r['agg']:>7.1f} "
                  f"{r['cpu']:>6.1f} "
                  f"{r['predicted']:>9.1f} {r['rss']:>12.0f} {r['ratio']:>12.2f} "
                  f"{r['expected']:>12.2f} {r['ate']:>8.5f} {r['load']:>5.1f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000])
