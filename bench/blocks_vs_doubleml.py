"""Block ensembles at the rows-per-fold floor against the non-private peer (issue 28 §2), in one
process, on the same data.

Data: ``dpcausal.datasets.make_large`` (n = 10^6 by default, d = 5, outcome in [0, 1], a
logistic propensity and a linear outcome, population ATE about 0.0992). Run in this order:

1. DoubleML's IRM (ATE), 5-fold cross-fitting, ``LogisticRegression`` / ``LinearRegression``
   nuisances (the same model classes as ours), its default trimming; its 95% CI is the
   non-private baseline. DoubleML is a bench-only dependency: ``bench/requirements.txt``.
2. ``PrivateATE`` with the planner's defaults (``n_folds``, ``block_folds``, ``sigma2``,
   ``ci_share`` all "auto"; AIPW, eta = 0.2, zeta = 1, outcome_bounds (0, 1)), in evaluation
   mode so that the pre-noise estimate can be compared with DoubleML's (the noise comes from OS
   entropy; the release path and its cost are the same as in release mode).

Printed: rows per fold, K, K', B; both estimates and 95% CI half-widths; the CI ratio (private /
DoubleML, and private / our own non-private 1.96 sqrt(V_hat)); wall and CPU seconds of each fit
and their ratio; the peak resident memory above the data of each fit (sampled every 5 ms from
/proc/self/statm); the load average.

    .venv/bin/python bench/blocks_vs_doubleml.py [n]

Measured on 2026-11-26 (2 cores, load average 2.4 -> 1.8), n = 10^6: K = 20,701 = 163 blocks of
K' = 127, 48 rows per fold; DoubleML 31.2 s wall / 34.7 CPU s / 598 MiB, PrivateATE 9.7 s /
11.3 CPU s / 51 MiB (time ratio 0.31 wall, 0.33 CPU); released CI 2.13x DoubleML's and 1.89x
its own non-private one; pre-noise estimate +0.10 DoubleML SE from DoubleML's.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def measured(fn: Callable[[], Any]) -> tuple[Any, float, float, float]:
    """``(result, wall s, cpu s, peak RSS above the start in MiB)`` of ``fn()``."""
    start, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.005)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    done.set()
    watcher.join()
    return out, wall, cpu, (max(peak[0], _rss()) - start) / 2**20


def doubleml_irm(X: np.ndarray, A: np.ndarray, Y: np.ndarray) -> tuple[float, float]:
    """DoubleML IRM, 5 folds: (estimate, 95% CI half-width)."""
    import doubleml as dml
    from sklearn.linear_model import LinearRegression, LogisticRegression

    data = dml.DoubleMLData.from_arrays(X, Y, A)
    irm = dml.DoubleMLIRM(data, ml_g=LinearRegression(), ml_m=LogisticRegression(), n_folds=5,
                          score="ATE")
    irm.fit()
    lo, hi = irm.confint(level=0.95).to_numpy()[0]
    return float(irm.coef[0]), float((hi - lo) / 2)


def private(X: np.ndarray, A: np.ndarray, Y: np.ndarray) -> Any:
    from dpcausal import PrivateATE

    est = PrivateATE(outcome_bounds=(0, 1), propensity_clip=0.2, zeta=1.0)
    return est.fit(X, A, Y, evaluation=True)


def main(n: int) -> None:
    from dpcausal.datasets import make_large

    print(f"cores: {os.cpu_count()}; load average at start: {os.getloadavg()}")
    X, A, Y, ate = make_large(n, 5, random_state=0)
    print(f"n = {n}, d = 5, population ATE {ate:.5f}")
    (d_ate, d_half), d_wall, d_cpu, d_mem = measured(lambda: doubleml_irm(X, A, Y))
    rel, p_wall, p_cpu, p_mem = measured(lambda: private(X, A, Y))
    p = rel.params
    half = (rel.ci[1] - rel.ci[0]) / 2
    own = 1.959964 * rel.nonprivate["variance"] ** 0.5
    print(f"planner: K = {p['n_folds']}, K' = {p['block_folds']}, B = {p['n_blocks']}, "
          f"rows per fold >= {p['rows_per_fold']} (largest block {p['rows_per_block']}), "
          f"sigma2 {p['sigma2']}, ci_share {p['ci_share']}")
    print(f"{'':<22} {'estimate':>9} {'CI half':>9} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9}")
    print(f"{'DoubleML IRM (5 folds)':<22} {d_ate:>9.5f} {d_half:>9.5f} {d_wall:>7.1f} "
          f"{d_cpu:>7.1f} {d_mem:>9.0f}")
    print(f"{'PrivateATE (released)':<22} {rel.ate:>9.5f} {half:>9.5f} {p_wall:>7.1f} "
          f"{p_cpu:>7.1f} {p_mem:>9.0f}")
    print(f"{'  its pre-noise value':<22} {rel.nonprivate['ate']:>9.5f} {own:>9.5f}")
    print(f"CI ratio private / DoubleML {half / d_half:.2f} (goal <= 2.3); private / own "
          f"non-private {half / own:.2f}; time ratio private / DoubleML {p_wall / d_wall:.2f} "
          f"wall, {p_cpu / d_cpu:.2f} cpu; pre-noise minus DoubleML "
          f"{(rel.nonprivate['ate'] - d_ate) / (d_half / 1.959964):+.2f} DoubleML SE; "
          f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
