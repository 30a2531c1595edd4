"""Loop-based references for the cluster_dp tests (DoubleML-style manual implementations)."""

import numpy as np


def strat_dim_loop(v, s, z):
    """tau_hat and V_hat (spec §1.1 eq. 5, §3.6) with explicit loops."""
    n = len(v)
    tau, var = 0.0, 0.0
    for c in sorted(set(s)):
        t = [v[i] for i in range(n) if s[i] == c and z[i] == 1]
        k = [v[i] for i in range(n) if s[i] == c and z[i] == 0]
        w = (len(t) + len(k)) / n
        tau += w * (sum(t) / len(t) - sum(k) / len(k))
        var += w**2 * (np.var(t, ddof=1) / len(t) + np.var(k, ddof=1) / len(k))
    return tau, var


def s2(vals):
    m = sum(vals) / len(vals)
    return sum((x - m) ** 2 for x in vals) / (len(vals) - 1)


def var_nodp_loop(y0, y1, c, n1c):
    n = len(y0)
    out = 0.0
    for cl in sorted(set(c)):
        idx = [i for i in range(n) if c[i] == cl]
        nc = len(idx)
        a1, a0 = [y1[i] for i in idx], [y0[i] for i in idx]
        tc = [y1[i] - y0[i] for i in idx]
        out += (nc / n) ** 2 * (s2(a1) / n1c[cl] + s2(a0) / (nc - n1c[cl]) - s2(tc) / nc)
    return out
