"""Plotting only (matplotlib on the Agg backend, no Prefect or MLflow): the shared figure helpers
(``figures``), the figure of one release of any kind (``release``) and the meta-analysis forest
plot (``meta``). The papers' figures live beside their reproductions (``reproduce/plots_*``)."""
