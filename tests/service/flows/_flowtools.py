"""Helpers of the flow tests: a progress recorder, task states of a flow run, and the
non-private-value scanner."""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from pathlib import Path

import pandas as pd


class Recorder:
    """A progress listener (flows.progress) that records every event."""

    def __init__(self):
        self.events = []

    def phase(self, name, total=None):
        self.events.append(("phase", name, total))

    def advance(self, n=1, cached=0):
        self.events.append(("advance", n, cached))


#: the most rows one read returns (PREFECT_SERVER_API_DEFAULT_LIMIT): every read pages by it
PAGE = 200


def _paged(read, **filters) -> list:
    """Every row a Prefect client ``read`` (``read_logs``, ``read_task_runs``,
    ``read_artifacts``) returns for ``filters`` (filtered on the server), page by page: an
    unpaged read returns one page, which a long run's logs or a worker's session outgrow, so a
    test could miss its own rows."""
    rows: list = []
    while True:
        page = read(**filters, limit=PAGE, offset=len(rows))
        rows += page
        if len(page) < PAGE:
            return rows


def task_states(flow_run_id: str, prefix: str = "fit_fold") -> dict[str, str]:
    """{task run name: state name} of one flow run's tasks whose name starts with ``prefix``
    (None while the server has not recorded a state: it records task runs from events)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = _paged(client.read_task_runs,
                      flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return {r.name: r.state and r.state.name for r in runs if r.name.startswith(prefix)}


def artifacts_of(flow_runs=None, key_like: str | None = None) -> list:
    """The Prefect artifacts of these flow runs (ids), or whose key is ``LIKE key_like``,
    filtered by the server and paged (:func:`_paged`)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    flt = (ArtifactFilter(key=ArtifactFilterKey(like_=key_like)) if key_like is not None else
           ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[str(r) for r in flow_runs])))
    with get_client(sync_client=True) as client:
        return _paged(client.read_artifacts, artifact_filter=flt)


def flow_logs(flow_run_id: str) -> list[str]:
    """Every log line of one flow run (its tasks' included), filtered by the server and paged,
    after the log handler has sent what it holds."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30)
    with get_client(sync_client=True) as client:
        logs = _paged(client.read_logs,
                      log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return [log.message for log in logs]


# ------------------------------------------------------------------ leak scanner
# A decimal with >= 6 significant digits has >= 7 digit-or-point characters in its mantissa: the
# lookahead skips the short numbers that binary blobs are full of before Python sees them.
_NUMBER = re.compile(rb"[-+]?(?=[\d.]{7})(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?")


class Scanner:
    """Finds secret floats in text (as decimals with >= 6 significant digits, to relative 1e-6)
    and in binary (IEEE-754 doubles, both byte orders, as pickle, sqlite and numpy store them);
    and secret ``counts`` (data-dependent integers) as whole decimal numbers in text (not part of
    a longer number, a decimal, a word or a dash-separated id such as a UUID) or as a metric;
    and secret ``keys`` (bytes) raw, as hex or as base64."""

    def __init__(self, secrets: dict[str, float], counts: dict[str, int] | None = None,
                 keys: dict[str, bytes] | None = None) -> None:
        self.secrets = {k: float(v) for k, v in secrets.items()}
        self.packed = {k: (struct.pack("<d", v), struct.pack(">d", v))
                       for k, v in self.secrets.items()}
        self.counts = {k: re.compile(rb"(?<![\w.\-])%d(?![\w.\-])" % int(v))
                       for k, v in (counts or {}).items()}
        self.count_values = {k: int(v) for k, v in (counts or {}).items()}
        self.keys = {k: (v, v.hex().encode(), base64.b64encode(v).rstrip(b"="),
                         base64.urlsafe_b64encode(v).rstrip(b"="))
                     for k, v in (keys or {}).items()}

    def value_hits(self, x: float, where: str) -> list[str]:
        return [f"{name} as number in {where}" for name, v in self.secrets.items()
                if math.isfinite(x) and abs(x - v) <= 1e-9 * max(1e-12, abs(v))] + [
            f"{name} as number in {where}" for name, v in self.count_values.items() if x == v]

    def bytes_hits(self, blob: bytes, where: str) -> list[str]:
        hits = [f"{name} as binary double in {where}" for name, pk in self.packed.items()
                if pk[0] in blob or pk[1] in blob]
        hits += [f"{name} as text in {where}" for name, pattern in self.counts.items()
                 if pattern.search(blob)]
        hits += [f"{name} in {where}" for name, forms in self.keys.items()
                 if any(f in blob for f in forms)]
        for m in _NUMBER.finditer(blob):
            digits = re.sub(rb"[^0-9]", b"", m.group().split(b"e")[0].split(b"E")[0]).lstrip(b"0")
            if len(digits) < 6:
                continue
            x = float(m.group())
            hits += [f"{name} as text {m.group().decode()} in {where}"
                     for name, v in self.secrets.items() if abs(x - v) <= 1e-6 * abs(v)]
        return hits

    def file_hits(self, path: Path) -> list[str]:
        blob = path.read_bytes()
        hits = self.bytes_hits(blob, str(path))
        try:  # Prefect result records: JSON with a base64 cloudpickle payload
            record = json.loads(blob)
        except (ValueError, UnicodeDecodeError):
            return hits
        for key, value in _walk_strings(record):
            try:
                decoded = base64.b64decode(value, validate=True)
            except ValueError:
                continue
            hits += self.bytes_hits(decoded, f"{path} [{key}, base64-decoded]")
        return hits

    def tree_hits(self, root: Path) -> list[str]:
        return [h for p in sorted(Path(root).rglob("*")) if p.is_file() for h in self.file_hits(p)]

    def mlflow_hits(self, tracking_uri: str) -> list[str]:
        """Params, tags, every metric value of every run, and every artifact of every run."""
        import tempfile

        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
        hits: list[str] = []
        for exp in client.search_experiments():
            for run in client.search_runs([exp.experiment_id]):
                rid = run.info.run_id
                for kind, mapping in (("param", run.data.params), ("tag", run.data.tags)):
                    for k, v in mapping.items():
                        hits += self.bytes_hits(f"{k}={v}".encode(), f"run {rid} {kind} {k}")
                for key in run.data.metrics:
                    for m in client.get_metric_history(rid, key):
                        hits += self.value_hits(m.value, f"run {rid} metric {key}")
                with tempfile.TemporaryDirectory() as tmp:
                    for art in client.list_artifacts(rid):
                        local = Path(client.download_artifacts(rid, art.path, tmp))
                        files = [local] if local.is_file() else list(local.rglob("*"))
                        hits += [h for f in files if f.is_file() for h in self.file_hits(f)]
        return hits


def _walk_strings(obj, key=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk_strings(v, f"{key}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk_strings(v, f"{key}[{i}]")
    elif isinstance(obj, str) and len(obj) >= 12:
        yield key, obj


def write_exp_a(path: Path, seed: int, n: int = 2000) -> Path:
    """Experiment A (spec §6.2) as the CLI's demo writes it: columns X1, A, Y."""
    from dpcausal.datasets import make_experiment_a

    X, A, Y, _ = make_experiment_a(n, random_state=seed)
    pd.DataFrame({"X1": X[:, 0], "A": A, "Y": Y}).to_csv(path, index=False)
    return path


def give_cap(dataset: str, **cap) -> None:
    """The curator's explicit cap (a config never creates one): zeta 50 by default."""
    from tasks.ledger_ops import set_initial_budget

    set_initial_budget(dataset, **(cap or {"zeta": 50.0}))


def charges(dataset: str) -> int:
    """How many charges the ledger holds for ``dataset`` (0 for a dataset it does not know)."""
    from dpcausal.ledger import Ledger

    with Ledger(create=True) as led:
        return led.spent(dataset).n_charges if led.has_dataset(dataset) else 0


def ledger_rows() -> dict[str, list[tuple]]:
    """Every row of every table of the ledger, by table, reservations of processes that are gone
    first marked ``incomplete`` (as every read of the ledger marks them): what a refusal must
    leave as it was. ``Ledger.budgets()`` holds no more than this (it is computed from these
    rows), but composes every dataset's headroom (PLD bisection), which takes a second or more
    per dataset of a session's ledger."""
    import sqlalchemy as sa

    from dpcausal.ledger import Ledger, schema
    from dpcausal.ledger.store import _mark_dead_reservations

    with Ledger(create=True) as led, led.engine.begin() as conn:
        _mark_dead_reservations(conn)
        return {table.name: [tuple(row) for row in conn.execute(
                    sa.select(table).order_by(*table.primary_key.columns))]
                for table in schema.metadata.sorted_tables}


def spy_on_block_sums(monkeypatch) -> list:
    """Record what reaches the flow's ``combine_blocks`` (the per-partition block sums the
    workers return) while the release runs as it would; returns the list the calls fill."""
    import flows.partitioned_release as partitioned_flow

    reached: list = []
    real_combine = partitioned_flow.combine_blocks

    def spy(per_partition):
        reached.append(per_partition)
        return real_combine(per_partition)

    monkeypatch.setattr(partitioned_flow, "combine_blocks", spy)
    return reached


def params_disagreeing(params: dict[str, str], release: dict) -> list[str]:
    """The MLflow params of a release's run that do not hold what the release used (issue 34):
    a param logged as ``None`` (an unset config field: the release resolved it), and a param of
    the mechanism's section (``estimator.*`` or ``mechanism.*``) whose name the release's JSON
    also publishes (its ``params``, its fields or its privacy detail) with another value."""
    published = {**(release.get("privacy") or {}).get("detail", {}), **release,
                 **(release.get("params") or {})}
    bad = [f"{k}=None" for k, v in params.items() if v == "None"]
    for key, value in params.items():
        section, _, name = key.partition(".")
        if section in ("estimator", "mechanism") and name in published:
            want = published[name]
            want = json.dumps(want) if isinstance(want, (list, tuple)) else str(want)
            if value != want:
                bad.append(f"{key}={value} but release.json has {want}")
    return bad
