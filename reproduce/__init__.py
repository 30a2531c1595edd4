"""Paper reproduction: the experiments of the four papers behind ``dpcausal``, as pure functions.

One module per paper, arranged alike (experiment drivers, paper targets, verdicts, report text);
the data generators they draw from stay in the library (``dpcausal.datasets``, ``*/data.py``,
``*/generators.py``). Nothing here is needed for a release.

- :mod:`reproduce.ate`, :mod:`reproduce.ate_report`: experiments A-D of the core estimator and
  their markdown (spec ``dp_ate_ensemble.md`` §6).
- :mod:`reproduce.cluster_dp`, :mod:`reproduce.cluster_dp_simulate`,
  :mod:`reproduce.cluster_dp_report`: Cluster-DP experiments 1-7, the vectorised Monte Carlo
  driver and the T/Q verdict report (spec ``cluster_dp.md`` §4).
- :mod:`reproduce.user_level`: Clip-User experiments (spec ``user_level_clip.md`` §5).
- :mod:`reproduce.federated`, :mod:`reproduce.federated_report`: Tables 2-7 of the federated paper
  by recipe R and their markdown (spec ``federated_secagg.md`` §6).
- ``reproduce.plots_<paper>``: each paper's figures (matplotlib only, through ``plots.figures``).

Layer: imports ``dpcausal`` and ``plots`` only (never Prefect or MLflow); ``tasks/`` and ``flows/``
(the ``dpcausal reproduce`` command) run these and write the reports. Spec sections cited here are
summarised in ``dpcausal/SPECS.md``.
"""
