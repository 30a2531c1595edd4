"""The partitioned release flow (flows/partitioned_release.py) on its default in-process Dask
runner: public refusals before the charge, one committed charge per release, evaluation refused
for a budgeted dataset. The separate-disks cluster test is tests/integration/
test_partitioned_dask.py."""

from __future__ import annotations

import pytest

ESTIMATOR = {"estimator": "aipw", "outcome_bounds": [-1.0, 1.0]}


def _partitions(tmp_path_factory, seed: int) -> str:
    from dpcausal.ate.partitioned import write_parquet_partitions

    path = tmp_path_factory.mktemp("partitioned-source")
    write_parquet_partitions(path, n=6000, d=2, n_partitions=3, seed=seed)
    return str(path)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The partitions the release tests charge (the ledger binds them to their dataset)."""
    return _partitions(tmp_path_factory, seed=4)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Partitions no test releases: evaluation mode reads them, in any test order."""
    return _partitions(tmp_path_factory, seed=5)


def _run(source, return_state=False, **kwargs):
    from flows.partitioned_release import partitioned_release

    base = {"id_column": "id", "treatment": "A", "outcome": "Y", "estimator": ESTIMATOR,
            "n_folds": 12}
    return partitioned_release(source, **{**base, **kwargs}, return_state=return_state)


def _progress(flow_run_id) -> list[tuple[str, float]]:
    """(description, progress) of the flow run's progress artifacts."""
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return sorted((a.description, a.data) for a in arts if a.type == "progress")


def test_release_charges_once_and_publishes_no_estimate(source):
    from dpcausal.ledger import Ledger

    with Ledger(create=True) as led:
        led.set_budget("partitioned-flow", zeta=2.0)
    state = _run(source, dataset_id="partitioned-flow", return_state=True)
    out = state.result()
    assert out["nonprivate"] is None and out["n"] == 6000 and out["n_folds"] == 12
    assert out["params"]["folds"] == "keyed_hash(id)"
    with Ledger() as led:
        history = led.history("partitioned-flow")
    assert history["status"].tolist() == ["committed"]
    assert _progress(state.state_details.flow_run_id) == [
        ("aggregation phase: partitions done", 100.0), ("fit phase: partitions done", 100.0)]


@pytest.mark.parametrize("override, error, match", [
    ({"treatment": "T"}, ValueError, r"columns \['T'\] are not in the partitions"),
    ({"estimator": {**ESTIMATOR, "zeta": -1}}, ValueError, "zeta"),
    ({"n_folds": 2}, ValueError, "number of non-empty partitions"),
])
def test_public_refusals_come_before_the_charge(source, override, error, match):
    from dpcausal.ledger import Ledger

    with Ledger(create=True) as led:
        led.set_budget("partitioned-refusals", zeta=2.0)
    with pytest.raises(error, match=match):
        _run(source, dataset_id="partitioned-refusals", **override)
    with Ledger() as led:
        assert led.history("partitioned-refusals").empty


def test_evaluation_is_refused_unless_the_registration_allows_it(synthetic):
    """Issue 40 item 7: one rule for evaluation mode (a non-private read), the in-memory path's
    (tasks.preflight.check_evaluation_allowed): a dataset id whose registration does not allow
    it is refused, a cap without a registration included. Run alone, the partitioned flow
    evaluated such a dataset (it refused only data the ledger bound to another id)."""
    from dpcausal.ledger import Ledger

    with Ledger(create=True) as led:
        led.set_budget("partitioned-eval", zeta=2.0)
    for dataset in ("partitioned-eval", "partitioned-never-registered"):
        with pytest.raises(ValueError, match="evaluation mode is refused"):
            _run(synthetic, dataset_id=dataset, evaluation=True)
    with Ledger() as led:
        assert led.history("partitioned-eval").empty
    out = _run(synthetic, evaluation=True)  # no dataset id: data no ledger entry knows
    assert out["evaluation"] is True and abs(out["nonprivate"]["ate"] - 0.15) < 0.05


def test_evaluation_without_a_dataset_id_is_refused_for_released_data(tmp_path_factory):
    """Data the ledger binds to a dataset (released once) are not read non-privately under no
    dataset id either."""
    from dpcausal.ledger import Ledger

    released = _partitions(tmp_path_factory, seed=6)
    with Ledger(create=True) as led:
        led.set_budget("partitioned-released", zeta=2.0)
    _run(released, dataset_id="partitioned-released")
    with pytest.raises(ValueError, match="evaluation mode is refused .*partitioned-released"):
        _run(released, evaluation=True)


def test_without_n_folds_the_planner_picks_k(synthetic):
    from dpcausal import PrivateATE

    out = _run(synthetic, n_folds=None, compute_budget=60.0, evaluation=True)
    planned = PrivateATE(outcome_bounds=(-1, 1), compute_budget=60.0).resolved_n_folds(6000, 2)
    assert out["n_folds"] == planned > 12
