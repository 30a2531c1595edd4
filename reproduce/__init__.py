"""Paper reproduction: the experiments of the four papers behind ``dpcausal``, as pure functions.

One subpackage per paper, arranged alike: ``experiments`` (drivers, paper targets, verdicts),
``plots`` (the paper's figures, matplotlib only, through ``plots.figures``) and, where the paper
has one, ``report`` (the markdown). The data generators they draw from stay in the library
(``dpcausal.datasets``, ``*/data.py``, ``*/generators.py``). Nothing here is needed for a release.

- :mod:`reproduce.ate`: experiments A-D of the core estimator (spec ``dp_ate_ensemble.md`` §6).
- :mod:`reproduce.cluster_dp`: Cluster-DP experiments 1-7, with the vectorised Monte Carlo driver
  ``simulate`` and the T/Q verdict report (spec ``cluster_dp.md`` §4).
- :mod:`reproduce.user_level`: Clip-User experiments (spec ``user_level_clip.md`` §5).
- :mod:`reproduce.federated`: Tables 2-7 of the federated paper by recipe R (spec
  ``federated_secagg.md`` §6).

Layer: imports ``dpcausal`` and ``plots`` only (never Prefect or MLflow); ``tasks/`` and ``flows/``
(the ``dpcausal reproduce`` command) run these and write the reports. Spec sections cited here are
summarised in ``dpcausal/SPECS.md``.
"""
