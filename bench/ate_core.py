"""Benchmark of the core estimator (issue 3): experiment B (n=250,000, d=2, K=500, AIPW with
LogisticRegression + LinearRegression, evaluation mode) and experiment A (n=5,000, K=200).

Prints wall time split into fold fitting and aggregation(+release), and the process's peak RSS
(tracemalloc is not used: it slows the Python-heavy fitting loop several-fold). As a
same-run baseline, experiment A is also timed through the generic per-model predict path
(models wrapped in a Pipeline, which disables coefficient stacking).

    .venv/bin/python bench/ate_core.py
"""

from __future__ import annotations

import resource
import time

from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from dpcausal import PrivateATE
from dpcausal.datasets import make_experiment_a, make_experiment_b


def run(label, est, X, A, Y):
    t0 = time.perf_counter()
    Xa, Aa, Ya = est.validate(X, A, Y)
    folds = est.make_folds(len(Ya))
    models = est.fit_folds(Xa, Aa, Ya, folds)
    t1 = time.perf_counter()
    nuis = est.aggregate(Xa, folds, models)
    rel = est.release(Aa, Ya, nuis, evaluation=True)
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{label:<34} fit {t1 - t0:6.2f} s   aggregate+release {t2 - t1:6.2f} s   "
          f"total {t2 - t0:6.2f} s   peak RSS so far {rss:6.0f} MiB   "
          f"tau_hat {rel.nonprivate['ate']:.4f}")
    return t2 - t0


def main():
    X, A, Y, _ = make_experiment_a(n=5000, random_state=0)
    args = dict(estimator="aipw", n_folds=200, random_state=0)
    run("A  n=5000 K=200 (stacked)", PrivateATE(**args), X, A, Y)
    ident = FunctionTransformer()
    run("A  n=5000 K=200 (generic baseline)",
        PrivateATE(**args, propensity_model=make_pipeline(ident, LogisticRegression()),
                   outcome_model=make_pipeline(ident, LinearRegression())), X, A, Y)
    X, A, Y, _ = make_experiment_b(n=250_000, random_state=0)
    run("B  n=250000 K=500 (stacked)", PrivateATE(estimator="aipw", n_folds=500, random_state=0),
        X, A, Y)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the whole process: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
