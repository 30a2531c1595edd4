"""Coverage of ``n_folds="auto"``'s fold-size bias rule where its assumptions fail worst, beside
the same data without the rule (dpcausal/SPECS.md "Fold-size bias at large n").

Designs: ``make_threshold`` (d = 2, a step the degree-2 outcome models cannot fit, the degree-2
logistic propensity exact) at the propensity ranges of :data:`dpcausal.datasets.HARD_OVERLAP`:
``poor_overlap`` (pi on [0.01, 0.99]) and ``rare_treated`` (pi on [0.01, 0.15], 3.6% treated).
True ATE 0.15 in closed form (the effect does not depend on pi).

Each repetition draws fresh data (``random_state = 60_000 + rep``) and runs, on those rows, one
evaluation release per mode:

- ``rule``: ``PrivateATE(outcome_bounds=(-1, 2), zeta=zeta)`` at its defaults (``n_folds`` and
  ``propensity_clip`` "auto": the rule binds where K is below the floor-and-budget K);
- ``no_rule``: the same with ``n_folds`` and ``block_folds`` stated as the floor-and-budget rule
  alone takes them (:func:`dpcausal.ate.planner.auto_folds` without ``noise_at``); the clip is
  then "auto" at that K, as auto would take it without the rule;
- ``share=<p>``: the defaults with ``treated_share=p`` declared (the floor, the envelope and the
  clip then count the smaller arm: SPECS.md "Fold-size bias at large n", the smaller arm);
- ``K=<int>[,eta=<float>]``: that K (and clip) stated.

Each line of the output (JSON, appended as it goes, so a stopped run keeps its releases):
design, mode, rep, K, K', eta, sigma1, whether the CI covers 0.15, the pre-noise estimate minus
0.15, the half-width. ``--summary`` prints per (design, mode): coverage, mean pre-noise bias and
its SE, median half-width, and the 1-minute load average at the start and end.

    nice -n 10 .venv/bin/python bench/fold_bias_coverage.py OUT.jsonl [--n 300000] [--zeta 64]
        [--reps 200] [--designs poor_overlap rare_treated] [--modes rule no_rule K=120]
    .venv/bin/python bench/fold_bias_coverage.py OUT.jsonl --summary

``--rows M ...`` instead runs :func:`rows_sweep` (printed, OUT unused): the pre-noise estimate of
AIPW, G and IPW at M rows per fold on the same rows, to see which nuisance carries a bias and
how it falls with M.

    nice -n 10 .venv/bin/python -W ignore bench/fold_bias_coverage.py - --designs rare_treated
        --rows 100 236 500 1000 2500 10000 30000 --seeds 2

Measured 7 Dec 2026 (n = 300,000, zeta = 64; load 3-7): the figures in SPECS.md ("Fold-size
bias at large n", *Coverage where it binds*) and in the docstring of
``tests/library/ate/test_default_models_bias.py::test_auto_where_overlap_is_poor_or_treated_rare``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

TRUTH = 0.15
BOUNDS = (-1.0, 2.0)


def estimators(n: int, zeta: float, rep: int, modes: list[str]) -> dict:
    """The release of each mode at (n, d = 2, zeta); a mode ``K=<int>`` states that K (the
    full ensemble up to 256 folds, else blocks of at most 128), ``K=<int>,eta=<float>`` also
    the propensity clip."""
    from dpcausal import PrivateATE
    from dpcausal.ate.planner import auto_folds

    k0, kb0 = auto_folds(n, 2, estimator="aipw", model_kind="quadratic", block_folds="auto")
    out = {"rule": PrivateATE(outcome_bounds=BOUNDS, zeta=zeta, random_state=rep),
           "no_rule": PrivateATE(outcome_bounds=BOUNDS, zeta=zeta, n_folds=k0,
                                 block_folds=kb0 if kb0 < k0 else None, random_state=rep)}
    stated = {mode: dict(kv.split("=") for kv in mode.split(","))
              for mode in modes if mode.startswith("K=")}
    declared = {mode: float(mode.split("=")[1]) for mode in modes if mode.startswith("share=")}
    return {mode: est for mode, est in out.items() if mode in modes} | {
        mode: PrivateATE(outcome_bounds=BOUNDS, zeta=zeta, n_folds=int(kv["K"]),
                         propensity_clip=float(kv["eta"]) if "eta" in kv else "auto",
                         random_state=rep)
        for mode, kv in stated.items()} | {
        mode: PrivateATE(outcome_bounds=BOUNDS, zeta=zeta, treated_share=share, random_state=rep)
        for mode, share in declared.items()}


def run(out: str, n: int, zeta: float, reps: int, designs: list[str], modes: list[str]) -> None:
    from dpcausal.datasets import make_threshold
    from dpcausal.validation import FoldBiasWarning

    with open(out, "a") as f:
        f.write(json.dumps({"start": time.time(), "load": os.getloadavg()[0], "n": n,
                            "zeta": zeta}) + "\n")
        for design in designs:
            for rep in range(reps):
                X, A, Y, truth = make_threshold(n, design, random_state=60_000 + rep)
                assert truth == TRUTH
                for mode, est in estimators(n, zeta, rep, modes).items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", FoldBiasWarning)   # no_rule: on purpose
                        rel = est.fit(X, A, Y, evaluation=True)
                        k, kb = est.resolved_folds(n, 2)
                        sigma1 = est.calibration(n, 2).sigma_ate
                    f.write(json.dumps({
                        "design": design, "mode": mode, "rep": rep, "n": n, "zeta": zeta,
                        "K": k, "Kb": kb, "eta": est.resolved_propensity_clip(n, 2),
                        "sigma1": sigma1, "treated": int(A.sum()),
                        "covers": bool(rel.ci[0] <= truth <= rel.ci[1]),
                        "bias": rel.nonprivate["ate"] - truth,
                        "half": (rel.ci[1] - rel.ci[0]) / 2}) + "\n")
                    f.flush()
        f.write(json.dumps({"end": time.time(), "load": os.getloadavg()[0]}) + "\n")


def rows_sweep(design: str, n: int, rows: list[int], seeds: int, clip: float) -> None:
    """Pre-noise estimate minus the truth of AIPW, G and IPW at a stated K = n // m (blocks of at
    most 127 folds) and a stated clip, on the same rows for every m: which nuisance carries the
    bias, and how it falls with the rows per fold (and the treated rows per fold)."""
    from dpcausal import PrivateATE
    from dpcausal.datasets import make_threshold
    from dpcausal.validation import FoldBiasWarning

    print(f"load {os.getloadavg()[0]:.2f}")
    for seed in range(seeds):
        X, A, Y, truth = make_threshold(n, design, random_state=70_000 + seed)
        for m in rows:
            k = n // m if n // m <= 127 else n // m // 127 * 127
            line = []
            for estimator in ("aipw", "g", "ipw"):
                est = PrivateATE(estimator=estimator, outcome_bounds=BOUNDS, propensity_clip=clip,
                                 n_folds=k, block_folds=min(k, 127), random_state=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FoldBiasWarning)
                    rel = est.fit(X, A, Y, evaluation=True)
                line.append(f"{estimator} {rel.nonprivate['ate'] - truth:+.5f}")
            print(f"{design} seed {seed} m {n // k:,} treated/fold {A.sum() / k:.1f} K {k:,}: "
                  + ", ".join(line), flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


def summary(out: str) -> None:
    rows = [json.loads(line) for line in open(out)]
    for mark in (r for r in rows if "start" in r or "end" in r):
        print(mark)
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        if "design" in r:
            cells.setdefault((r["design"], r["mode"], r["n"], r["zeta"]), []).append(r)
    for (design, mode, n, zeta), rs in cells.items():
        bias = np.array([r["bias"] for r in rs])
        ks = sorted({(r["K"], r["Kb"], r["eta"], r["sigma1"]) for r in rs})
        print(f"{design:13s} {mode:8s} n={n:,} zeta={zeta:g} reps={len(rs)} "
              f"K,K',eta,sigma1={ks} rows/fold={n // ks[0][0]:,} "
              f"treated={np.mean([r['treated'] for r in rs]) / n:.4f} "
              f"coverage={np.mean([r['covers'] for r in rs]):.3f} "
              f"bias={bias.mean():+.5f} (SE {bias.std(ddof=1) / np.sqrt(len(rs)):.5f}) "
              f"sd={bias.std(ddof=1):.5f} "
              f"median half-width={np.median([r['half'] for r in rs]):.4f} "
              f"0.25 sigma1={0.25 * ks[0][3]:.5f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--n", type=int, default=300_000)
    p.add_argument("--zeta", type=float, default=64.0)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--designs", nargs="+", default=["poor_overlap", "rare_treated"])
    p.add_argument("--modes", nargs="+", default=["rule", "no_rule"])
    p.add_argument("--summary", action="store_true")
    p.add_argument("--rows", type=int, nargs="+", help="a rows-per-fold sweep (rows_sweep)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--clip", type=float, default=0.01)
    a = p.parse_args()
    if a.summary:
        summary(a.out)
    elif a.rows:
        rows_sweep(a.designs[0], a.n, a.rows, a.seeds, a.clip)
    else:
        run(a.out, a.n, a.zeta, a.reps, a.designs, a.modes)
