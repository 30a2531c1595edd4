"""Plotting only (matplotlib on the Agg backend, no Prefect or MLflow): the shared figure helpers
(``figures``) and the meta-analysis forest plot (``meta``); a release draws its own figure
(:meth:`dpcausal.Release.plot`). The papers' figures live beside their reproductions
(``reproduce/<paper>/plots.py``)."""
