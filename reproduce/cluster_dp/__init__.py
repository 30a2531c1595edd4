"""Cluster-DP: experiments 1-7 (:mod:`.experiments`), the vectorised Monte Carlo driver
(:mod:`.simulate`), the figures (:mod:`.plots`) and the T/Q verdict report (:mod:`.report`);
spec ``cluster_dp.md`` §4."""
