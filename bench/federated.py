"""Benchmark of the federated ATE release (PBM + pairwise-masking secure aggregation).

Prints, per size (clients per arm): end-to-end time of FederatedATE.run (calibration, encoding,
four secure aggregations on the sparse mask graph, decoding, CI), peak RSS of a fresh process,
the calibration time alone, and the per-client message size. Each size runs in its own
subprocess so the peak memory is that size's own.

    .venv/bin/python bench/federated.py            # 1e4, 1e5, 1e6 per arm
    .venv/bin/python bench/federated.py --one 100000
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import numpy as np

from dpcausal.federated import FederatedATE, calibrate_joint
from dpcausal.federated.calibration import _calibrate_joint


def one(n_arm: int, m: int) -> None:
    rng = np.random.default_rng(0)
    n = 2 * n_arm
    t = np.zeros(n, bool)
    t[rng.permutation(n)[:n_arm]] = True
    x = np.where(t, rng.normal(0.1, 0.3, n), rng.normal(-0.1, 0.3, n))
    fed = FederatedATE(R=1.0, epsilon=1.0, delta=1e-6, m1=m, m2=m, secagg="pairwise",
                       random_state=1)
    t0 = time.perf_counter()
    res = fed.run(x, t)  # end to end: calibration, encoding, 4 secure sums, decoding, CI
    t_run = time.perf_counter() - t0
    _calibrate_joint.cache_clear()
    t0 = time.perf_counter()
    cal = calibrate_joint((n_arm, n_arm), m, m, 1.0, 1e-6, 0.99)
    t_cal = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n_arm:>9,d} per arm  m={m:<6d} end-to-end {t_run:6.2f} s (of which "
          f"calibration {t_cal:5.2f} s)  peak RSS {peak_mb:7.0f} MB  "
          f"bits/client {res.bits_per_client:3d}  "
          f"eps {res.privacy['epsilon']:.4f} capped={cal.theta_capped}  "
          f"ate {res.ate:+.4f} width {res.ci[1] - res.ci[0]:.4f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", type=int)
    ap.add_argument("--m", type=int, default=256)
    args = ap.parse_args()
    if args.one:
        one(args.one, args.m)
        return
    print("FederatedATE end to end (epsilon=1, delta=1e-6, w=0.99, secagg=pairwise, sparse "
          "graph k=2ceil(log2 n) above 2000 clients)")
    for n_arm, m in ((10_000, args.m), (100_000, args.m), (1_000_000, args.m),
                     (1_000_000, 40_000)):  # last: m sized so theta is not capped (spec §4)
        subprocess.run([sys.executable, __file__, "--one", str(n_arm), "--m", str(m)],
                       check=True)
    print("Calibration with m sized so theta is not capped (spec §4: m >= 1.5 rho n_g):")
    for n_arm, m in ((10_000, 400), (100_000, 4_000), (1_000_000, 40_000)):
        t0 = time.perf_counter()
        cal = calibrate_joint((n_arm, n_arm), m, m, 1.0, 1e-6, 0.99)
        print(f"{n_arm:>9,d} per arm  m={m:<6d} joint calibration {time.perf_counter() - t0:6.2f} s"
              f"  theta1={cal.theta1[0]:.4f} theta2={cal.theta2[0]:.5f} eps={cal.epsilon:.6f} "
              f"bits/client={2 * int(np.ceil(np.log2(n_arm * m + 1)))}", flush=True)


if __name__ == "__main__":
    main()
