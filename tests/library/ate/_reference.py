"""A plain, loop-based reference of the paper's estimator, written from spec §2.1-§2.2 and §2.7
independently of the package (no shared helpers), used to check the vectorised implementation.
Fallbacks are not implemented here: callers use data where every fold-arm has >= 2 units."""

import numpy as np
from sklearn.base import clone


def reference_ate(X, A, Y, K, estimator, prop_model, out_model, bounds, eta):
    n = len(Y)
    lo, hi = bounds
    Y = np.clip(Y, lo, hi)
    folds = np.array_split(np.arange(n), K)
    fold_of = np.empty(n, dtype=int)
    for k, rows in enumerate(folds):
        fold_of[rows] = k
    models = []
    for rows in folds:
        Xk, Ak, Yk = X[rows], A[rows], Y[rows]
        pm = clone(prop_model).fit(Xk, Ak) if estimator != "g" else None
        m1 = clone(out_model).fit(Xk[Ak == 1], Yk[Ak == 1]) if estimator != "ipw" else None
        m0 = clone(out_model).fit(Xk[Ak == 0], Yk[Ak == 0]) if estimator != "ipw" else None
        models.append((pm, m1, m0))
    if estimator == "ipw":
        c = 0.0
    else:
        c = (lo + hi) / 2
    gamma = np.empty(n)
    for i in range(n):
        x = X[i : i + 1]
        s_inv1 = s_inv0 = s_m1 = s_m0 = 0.0
        for k in range(K):
            if k == fold_of[i]:
                continue
            pm, m1, m0 = models[k]
            if pm is not None:
                p = min(max(pm.predict_proba(x)[0, 1], eta), 1 - eta)
                s_inv1 += 1 / p
                s_inv0 += 1 / (1 - p)
            if m1 is not None:
                s_m1 += min(max(m1.predict(x)[0], lo), hi)
                s_m0 += min(max(m0.predict(x)[0], lo), hi)
        inv1, inv0 = s_inv1 / (K - 1), s_inv0 / (K - 1)
        mu1, mu0 = s_m1 / (K - 1) - c, s_m0 / (K - 1) - c
        y, a = Y[i] - c, A[i]
        if estimator == "g":
            gamma[i] = mu1 - mu0
        elif estimator == "ipw":
            gamma[i] = a * y * inv1 - (1 - a) * y * inv0
        else:
            gamma[i] = mu1 - mu0 + a * (y - mu1) * inv1 - (1 - a) * (y - mu0) * inv0
    tau = sum(gamma) / n
    var = sum((g - tau) ** 2 for g in gamma) / (n * (n - 1))
    return tau, var


def reference_block_ate(X, A, Y, fold_of, block_folds, estimator, prop_model, out_model,
                        bounds, eta):
    """Block ensembles (spec §2.5b) by plain loops: fold k belongs to block k // block_folds;
    each row averages the models of the other folds of its own block. ``fold_of`` is given
    (public); every fold must have >= 2 units of each arm."""
    n = len(Y)
    lo, hi = bounds
    Y = np.clip(Y, lo, hi)
    n_folds = int(max(fold_of)) + 1
    models = {}
    for k in range(n_folds):
        rows = [i for i in range(n) if fold_of[i] == k]
        Xk, Ak, Yk = X[rows], A[rows], Y[rows]
        pm = clone(prop_model).fit(Xk, Ak) if estimator != "g" else None
        m1 = clone(out_model).fit(Xk[Ak == 1], Yk[Ak == 1]) if estimator != "ipw" else None
        m0 = clone(out_model).fit(Xk[Ak == 0], Yk[Ak == 0]) if estimator != "ipw" else None
        models[k] = (pm, m1, m0)
    c = 0.0 if estimator == "ipw" else (lo + hi) / 2
    gamma = []
    for i in range(n):
        x = X[i : i + 1]
        block = fold_of[i] // block_folds
        others = [k for k in range(block * block_folds, (block + 1) * block_folds)
                  if k != fold_of[i]]
        inv1 = inv0 = mu1 = mu0 = 0.0
        for k in others:
            pm, m1, m0 = models[k]
            if pm is not None:
                p = min(max(pm.predict_proba(x)[0, 1], eta), 1 - eta)
                inv1 += 1 / p / len(others)
                inv0 += 1 / (1 - p) / len(others)
            if m1 is not None:
                mu1 += min(max(m1.predict(x)[0], lo), hi) / len(others)
                mu0 += min(max(m0.predict(x)[0], lo), hi) / len(others)
        mu1, mu0, y, a = mu1 - c, mu0 - c, Y[i] - c, A[i]
        if estimator == "g":
            gamma.append(mu1 - mu0)
        elif estimator == "ipw":
            gamma.append(a * y * inv1 - (1 - a) * y * inv0)
        else:
            gamma.append(mu1 - mu0 + a * (y - mu1) * inv1 - (1 - a) * (y - mu0) * inv0)
    tau = sum(gamma) / n
    return tau, sum((g - tau) ** 2 for g in gamma) / (n * (n - 1))
