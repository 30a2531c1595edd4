"""The analysts' gateway (issue 40): the one door a remote analyst has. A small FastAPI service
that ``dpcausal serve`` starts beside Prefect and MLflow; it holds the curator's Prefect
credential, reads the ledger's public facts and never reads data (:mod:`gateway.service`),
serves a JSON API with its OpenAPI schema and a plain HTML page (:mod:`gateway.app`,
:mod:`gateway.page`)."""
