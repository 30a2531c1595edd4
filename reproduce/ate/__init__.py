"""The core estimator's paper (Lebeda, Even, Bellet, Josse 2025): experiments A-D
(:mod:`.experiments`), their figures (:mod:`.plots`) and markdown report (:mod:`.report`);
spec ``dp_ate_ensemble.md`` §6."""
