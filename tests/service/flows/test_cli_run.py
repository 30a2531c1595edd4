"""``dpcausal run`` / ``demo``: a printed release on good input; otherwise one ``Error:``
paragraph on stderr and a distinct exit code (2 bad input or configuration, 3 refused by the
budget, 1 anything else), with no ledger charge before the release."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _flowtools import charges, give_cap, write_exp_a

from dpcausal.ledger import Ledger
from tests.service._text import without_paths

ROOT = Path(__file__).resolve().parents[3]
BAD_DATASET = "cli-bad-input"


@pytest.fixture
def cli_config(tmp_path, curator_registers):
    """A config file on experiment-A data of its dataset id's own (registration binds the data
    to one id), registered by its curator unless ``register=False``."""
    counter = iter(range(1000))

    def write(data_path=None, register=True, **top):
        dataset = (top.get("ledger") or {}).get("dataset_id", BAD_DATASET)
        seed = zlib.crc32(dataset.encode())
        data_path = data_path or tmp_path / f"{seed:08x}.csv"
        if not Path(data_path).exists() and Path(data_path).name == f"{seed:08x}.csv":
            write_exp_a(Path(data_path), seed)
        cfg = {"name": "cli", "data": {"path": str(data_path)},
               "columns": {"treatment": "A", "outcome": "Y"},
               "estimator": {"n_folds": 20, "fold_seed": 3, "outcome_bounds": [-1, 1]},
               "folds_per_task": 5, "ledger": {"dataset_id": BAD_DATASET, "budget": 50.0},
               **top}
        path = tmp_path / f"release{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        if register:  # the curator registers the dataset a run asks about (issue 32 §1)
            curator_registers(path)
        return str(path)
    return write


def _assert_error(result, code, match):
    assert result.exit_code == code, (match, result.output)
    # one Error paragraph; a release that failed after its charge was noticed of its bounds
    err = "\n".join(x for x in result.stderr.strip().splitlines()
                    if not x.startswith("Notice: the outcome bounds"))
    assert err.startswith("Error: ") and "\n" not in err and "Traceback" not in err, err
    assert pd.Series([err]).str.contains(match, regex=True).iloc[0], err
    assert result.stdout == ""


def _flow_runs() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.count_flow_runs()


def test_bad_input_fails_with_one_paragraph_exit_2_and_no_charge(cli_config, tmp_path, invoke):
    give_cap(BAD_DATASET)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: x\ndata: {path: [\n")
    cases = [
        ((str(tmp_path / "nope.yaml"),), r"config file .*nope\.yaml' does not exist"),
        # a run only asks: its data half must be the registration's (issue 32 §2)
        ((cli_config(tmp_path / "missing.csv", register=False),),
         r"data.path differs from the registration of dataset 'cli-bad-input'"),
        ((cli_config(), "--set", "columns.treatment=arm"),
         r"columns.treatment differs from the registration"),
        ((str(bad_yaml),), r"is not valid YAML"),
        ((cli_config(), "--set", "models.outcome.name=nosuch"), r"unknown outcome model 'nosuch'"),
        ((cli_config(), "--set", "estimator.zeta=-1"), r"zeta must be a finite number > 0"),
        ((cli_config(), "--set", "estimator.n_folds=5000"), r"n_folds=5000 is too large"),
        ((cli_config(), "--set", "estimator.outcome_bounds=null"), r"outcome_bounds"),
    ]
    before = _flow_runs()
    with ThreadPoolExecutor(max_workers=2) as pool:  # independent subprocesses: two at a time
        results = list(pool.map(lambda case: invoke("run", *case[0], "--no-progress"), cases))
    for result, (_, match) in zip(results, cases, strict=True):
        _assert_error(result, 2, match)
    assert charges(BAD_DATASET) == 0
    assert _flow_runs() == before  # refused before any flow ran


def test_exhausted_budget_exits_3_before_any_flow_and_without_charge(cli_config, invoke):
    dataset = "cli-small-budget"
    give_cap(dataset, zeta=1.0)
    before = _flow_runs()
    with Ledger() as led:
        where = led.where  # every refusal names the ledger it consulted (issue 25 §4)
    out = invoke("run", cli_config(ledger={"dataset_id": dataset}), "--no-progress")
    _assert_error(out, 3, r"budget exhausted for dataset cli-small-budget")
    assert f"Ledger: {where}." in out.stderr
    assert charges(dataset) == 0 and _flow_runs() == before
    no_cap = invoke("run", cli_config(ledger={"dataset_id": "cli-no-cap", "budget": 2.0}))
    _assert_error(no_cap, 3, r"no privacy budget in the ledger.*set-budget cli-no-cap --zeta 2")
    assert f"in the ledger at {where};" in no_cap.stderr


def test_values_never_fail_a_charged_release(cli_config, tmp_path, invoke):
    """A treatment coded 0/2 passes every public check; after the charge the missing-value
    policy treats the 2s as missing (a public rule), so the release completes (issue 26 §2)."""
    dataset = "cli-nonbinary"
    give_cap(dataset)
    # data of their own: with A doubled, the session's exp-A table keeps half its rows, a near
    # copy the ledger binds to this dataset (issue 32 item 7)
    frame = pd.read_csv(write_exp_a(tmp_path / "own.csv", 977))
    nonbinary = tmp_path / "nonbinary.csv"
    frame.assign(A=frame["A"] * 2).to_csv(nonbinary, index=False)
    out = invoke("run", cli_config(nonbinary, ledger={"dataset_id": dataset}), "--no-progress",
                 "--json")
    assert out.exit_code == 0, out.output
    release = json.loads(out.stdout)["release"]
    assert math.isfinite(release["ate"]) and release["params"]["missing"] == "impute"
    assert "0/1" not in out.stderr and "values such as" not in out.stderr
    assert charges(dataset) == 1


def test_run_prints_the_release_and_json(cli_config, invoke):
    dataset = "cli-good"
    give_cap(dataset)
    path = cli_config(ledger={"dataset_id": dataset})
    table = invoke("run", path, "--no-progress")
    assert table.exit_code == 0, table.output
    for label in ("ATE", "95% CI", "1.5-GDP", "covers both the sampling error and the privacy "
                  "noise", "dataset spend", "release id", "MLflow"):
        assert label in table.stdout, label
    with Ledger() as led:  # the release names the ledger it charged (issue 25 §4)
        assert f"\nledger: {led.where}\n" in table.stdout
    js = invoke("run", path, "--no-progress", "--json", "--set", "estimator.ci_share=0")
    assert js.exit_code == 0, js.output
    out = json.loads(js.stdout)
    assert out["release"]["ci"] is None and out["release"]["privacy"]["zeta"] == 1.5
    assert out["spent"]["n_charges"] == 2 and out["release_id"].endswith("/cli")
    assert out["spent"]["ledger"].endswith("ledger.db")
    assert isinstance(out["release"]["ate"], float)


def test_run_reads_the_data_once(cli_config, tmp_path, monkeypatch):
    """The CLI's preflight hands its checked input to the flow in memory (issue 27 §4): one read
    of the data per release (old: the preflight's, then the flow's own). The flow run alone
    reads once too, so the count catches a second read."""
    from click.testing import CliRunner
    from prefect.settings import PREFECT_API_URL

    import tasks.preflight
    from cli.main import main
    from conf.kinds import load_any
    from flows.release import run_release

    reads = []

    def counted(*args, **kwargs):
        reads.append(1)
        return read_frame(*args, **kwargs)

    read_frame = tasks.preflight.read_frame
    monkeypatch.setattr(tasks.preflight, "read_frame", counted)
    for key in ("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "MLFLOW_LOGGING_LEVEL"):
        monkeypatch.setenv(key, os.environ.get(key, "WARNING"))  # restored after the CLI's
    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    dataset = "cli-one-read"
    give_cap(dataset)
    path = cli_config(write_exp_a(tmp_path / "once.csv", 409), ledger={"dataset_id": dataset})
    out = CliRunner().invoke(main, ["run", path, "--no-progress", "--json"])
    assert out.exit_code == 0, out.output
    assert len(reads) == 1 and charges(dataset) == 1
    run_release(load_any(path))
    assert len(reads) == 2 and charges(dataset) == 2


def test_dry_run_exits_as_run_would_and_charges_nothing(cli_config, invoke, tmp_path):
    """Issue 25 §3: a rehearsal of every check before the charge (exit 3 before a cap exists, 0
    after), with no flow run and no charge; the release itself then exits the same."""
    dataset = "cli-dry-run"
    data = write_exp_a(tmp_path / "dry.csv", 412)  # its own data: bound to no other dataset
    path = cli_config(data, ledger={"dataset_id": dataset})
    before = _flow_runs()
    dry = invoke("run", "--dry-run", path)
    _assert_error(dry, 3, r"no privacy budget in the ledger")
    assert invoke("run", path, "--no-progress").exit_code == 3
    give_cap(dataset)
    dry = invoke("run", "--dry-run", path)
    assert dry.exit_code == 0 and "Nothing was charged" in dry.stdout, dry.output
    assert charges(dataset) == 0 and _flow_runs() == before
    assert invoke("run", path, "--no-progress").exit_code == 0
    assert charges(dataset) == 1


@pytest.fixture
def deployments(project):
    """The release_from_config deployments `dpcausal serve` creates, on the test server."""
    from prefect.client.orchestration import get_client

    from flows.deployed import release_from_config

    ids = [release_from_config.to_deployment(name=name).apply() for name in ("demo", "from-config")]
    yield
    with get_client(sync_client=True) as client:
        for deployment_id in ids:
            client.delete_deployment(deployment_id)


def _flow_run(url: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(url.rstrip("/").rsplit("/", 1)[-1])


SHIPPED_DEMO = ROOT / "conf" / "release" / "demo.yaml"  # one of the deployment's configs


def _shipped_demo_registered() -> str:
    """The shipped demo config, which ``run --submit`` may send (conf.deployment.
    REGISTERED_CONFIGS), with its dataset registered and capped as its curator's ``dpcausal
    ledger register demo-experiment-a conf/release/demo.yaml --zeta 50`` records it: its
    source, columns, types and policy from the config (issue 32 §1), bound by the source's keyed
    identity. Its data path, ``<data>/demo/experiment_a.csv``, is under the session's data
    folder, where no file need be: the public facts the curator would count there (``dpcausal
    demo``'s 5,000 records of X1, A, Y) are stated instead. Nothing in the submit tests reads
    the file: the checks before a submit use the registration only, and a submitted run waits
    for a worker."""
    from conf.kinds import KINDS, load_any
    from conf.registration import registration_values
    from store import source_fingerprint
    from tasks.data import source_identity

    config = load_any(str(SHIPPED_DEMO))
    dataset = config.ledger.dataset_id
    with Ledger(create=True) as led:
        led.register(dataset, **registration_values(config), n=5000,
                     facts={"unit": KINDS["ate"].build(config).unit, "names": ["X1", "A", "Y"],
                            "d": 1},
                     fingerprint=(source_fingerprint(source_identity(config.data)),))
    give_cap(dataset)
    return str(SHIPPED_DEMO)


def test_submit_starts_the_deployment_and_prints_the_run_url(project, cli_config, invoke):
    """Issue 27 §1: `run --submit` hands the config to the stack's deployment, waits for
    nothing, prints the flow run's URL; no deployment (or no stack) is one error, exit 2."""
    path = _shipped_demo_registered()
    _assert_error(invoke("run", "--submit", path), 2,
                  r"no deployment 'release_from_config/from-config' on http")
    # no Prefect API, and no `dpcausal serve` stack in the data folder (whose demo data the
    # shipped config names, so it stays the session's)
    assert not (project.root / "services" / "stack.info").exists()
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "run", "--submit", path],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "needs a running stack" in proc.stderr, proc.stderr


def test_submit_with_the_deployment(cli_config, invoke, deployments):
    path = _shipped_demo_registered()
    out = invoke("run", "--submit", path, "--set", "estimator.zeta=1.0")
    assert out.exit_code == 0, out.output
    url = out.stdout.strip()
    assert "/runs/flow-run/" in url and url.startswith("http"), out.stdout
    run = _flow_run(url)
    settings = run.parameters["settings"]
    assert settings == {"config": "conf/release/demo.yaml",
                        "overrides": {"estimator.zeta": 1.0}}   # the data are the config's


def test_submit_asks_only_about_registered_configs_and_analysis_keys(project, cli_config, invoke,
                                                                     deployments):
    """Issue 32 item 6: `run --submit` handed any config path and its data path to the
    deployment; an unregistered config or a curator's key is now refused here, exit 2, before
    anything is submitted."""
    own = cli_config(ledger={"dataset_id": "cli-submit"},   # registered from another file
                     estimator={"n_folds": 20, "outcome_bounds": [-1, 1], "zeta": 10.0})
    give_cap("cli-submit")
    copy = Path(own).with_name("copied.yaml")    # the same data half, not the registered file
    copy.write_text(Path(own).read_text())
    _assert_error(invoke("run", "--submit", str(copy)), 2,
                  r"--submit runs a config its curator registered.*not .*copied.yaml")
    demo = _shipped_demo_registered()
    _assert_error(invoke("run", "--submit", demo, "--set", "data.path=/tmp/other.csv"), 2,
                  r"data.path differs from the registration of dataset 'demo-experiment-a'")
    # even the registered path is the curator's: a run never sends it
    registered = str(project.root / "demo" / "experiment_a.csv")
    _assert_error(invoke("run", "--submit", demo, "--set", f"data.path={registered}"), 2,
                  r"'data.path' is not an analysis key a run may set")
    assert charges("cli-submit") == charges("demo-experiment-a") == 0


def test_submit_releases_the_config_its_curator_registered_wherever_it_is(
        tmp_path, cli_config, invoke, deployments):
    """Issue 42 friction 1: `run --submit CONFIG` refused any config outside conf/release/.
    A config its curator registered (`dpcausal ledger register DATASET CONFIG`) is submitted by
    its dataset; the deployment's flow runs that file (the registration names it), with the
    run's analysis keys, and releases."""
    from flows.deployed import release_from_config

    own = cli_config(ledger={"dataset_id": "cli-submit-own"}, register=False,
                     estimator={"n_folds": 20, "outcome_bounds": [-1, 1], "zeta": 1.0})
    registered = invoke("ledger", "register", "cli-submit-own", own, "--zeta", "20")
    assert registered.exit_code == 0, registered.output
    out = invoke("run", "--submit", own, "--set", "estimator.zeta=0.5")
    assert out.exit_code == 0, out.output
    run = _flow_run(out.stdout.strip())
    assert run.parameters["settings"] == {"dataset": "cli-submit-own",
                                          "overrides": {"estimator.zeta": 0.5}}
    release_from_config.validate_parameters(run.parameters)
    state = release_from_config(**run.parameters, return_state=True)   # as the worker runs it
    assert state.is_completed(), state.message
    assert state.result()["release"]["privacy"]["zeta"] == pytest.approx(0.5)
    assert charges("cli-submit-own") == 1


def test_a_prefect_error_of_a_submit_is_one_plain_message(deployments, monkeypatch):
    """Issue 42 friction 1: a config copied into conf/release/ after `dpcausal serve` deployed
    (the deployment's form lists the configs of that time) met a raw Prefect traceback (409
    Conflict). The server's refusal is now a plain error naming the fix."""
    from prefect.settings import PREFECT_API_URL

    from deploy.prefect_api import SubmitError, submit_release

    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    with pytest.raises(SubmitError, match=r"the stack's deployment .* refused the run.*"
                                          r"`dpcausal stop && dpcausal serve`") as err:
        submit_release({"config": "conf/release/copied-after-serve.yaml", "overrides": {}})
    assert "Traceback" not in str(err.value) and "409" not in without_paths(str(err.value))


def test_serve_prints_a_trigger_command_that_works_as_printed(project, deployments):
    """Issue 25 §6: the command `dpcausal serve` prints, run by a shell as printed (against the
    test server), creates a run of the demo deployment whose parameters the flow accepts."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.settings import PREFECT_API_URL

    from deploy.servers import trigger_command
    from flows.deployed import release_from_config

    demo = DeploymentFilter(name=DeploymentFilterName(any_=["demo"]))
    with get_client(sync_client=True) as client:
        before = {r.id for r in client.read_flow_runs(deployment_filter=demo)}
    command = trigger_command(PREFECT_API_URL.value())
    proc = subprocess.run(command, shell=True, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"},
                          timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with get_client(sync_client=True) as client:
        new = [r for r in client.read_flow_runs(deployment_filter=demo) if r.id not in before]
    assert len(new) == 1 and new[0].parameters["settings"] == {"zeta": 1.0}
    release_from_config.validate_parameters(new[0].parameters)


def test_help_documents_exit_codes_without_importing_heavy_libraries():
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--help"], capture_output=True,
                          text=True, env=dict(os.environ), check=True)
    assert "run" in proc.stdout and "demo" in proc.stdout
    text = " ".join(proc.stdout.split())
    assert "2 bad input" in text and "3 refused by the privacy budget" in text
    for modules, heavy in (("cli.main, cli.run_cmd", "'mlflow', 'prefect', 'sklearn'"),
                           # the CLI's checks and plan run before any Prefect server
                           ("tasks.preflight, tasks.planning", "'mlflow', 'prefect'")):
        out = subprocess.run([sys.executable, "-c", f"import {modules}, sys; print(sorted("
                              f"m for m in ({heavy}) if m in sys.modules))"],
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[]", modules


def _mechanism_config(tmp_path, kind: str, dataset: str, register, **ledger) -> str:
    """The shipped demo config of a mechanism, on freshly written demo data of the dataset's own
    (seeded by its id), own ledger dataset, registered with ``register`` (the curator's)."""
    import conf
    from demo import write_demo

    data = write_demo(kind, tmp_path / kind, seed=zlib.crc32(dataset.encode()))
    cfg = yaml.safe_load((Path(conf.__file__).parent / "release" / f"{kind}_demo.yaml").read_text())
    cfg["data"] = {"path": str(data)}
    cfg["ledger"] = {**cfg["ledger"], "dataset_id": dataset, **ledger}
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    register(path)
    return str(path)


def test_run_dispatches_on_kind(tmp_path, invoke, curator_registers):
    give_cap("cli-cluster-dp", epsilon=30.0, delta=1e-5, unit="label")
    path = _mechanism_config(tmp_path, "cluster_dp", "cli-cluster-dp", curator_registers)
    out = invoke("run", path, "--no-progress")
    assert out.exit_code == 0, out.output
    for label in ("ClusterDPResult", "per label", "dataset spend"):
        assert label in out.stdout, label
    assert charges("cli-cluster-dp") == 1
    js = invoke("run", path, "--json", "--set", "mechanism.epsilon=2.0")
    assert js.exit_code == 0, js.output
    assert json.loads(js.stdout)["release"]["privacy"]["epsilon"] == pytest.approx(2.0)
    assert charges("cli-cluster-dp") == 2


def test_mechanism_bad_input_exits_2_refusal_exits_3_without_charge(tmp_path, invoke,
                                                                   curator_registers):
    give_cap("cli-federated", epsilon=0.5, delta=1e-5, unit="client")
    path = _mechanism_config(tmp_path, "federated", "cli-federated", curator_registers)
    _assert_error(invoke("run", path, "--set", "mechanism.epsilon=0"), 2,
                  r"mechanism\.epsilon: Input should be greater than 0")
    _assert_error(invoke("run", path, "--set", "kind=laplace"), 2, r"kind 'laplace' is not one of")
    _assert_error(invoke("run", path), 3, r"budget exhausted for dataset cli-federated")
    assert charges("cli-federated") == 0


def test_demo_kind_writes_its_data_sets_its_cap_and_releases(project, invoke):
    out = invoke("demo", "--kind", "federated", "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["release"]["privacy"]["epsilon"] == pytest.approx(1.0)
    assert (project.root / "demo" / "federated.csv").is_file()
    with Ledger() as led:
        assert led.cap("demo-federated").epsilon == 5.0


def test_the_shipped_demo_config_reruns_the_demo_under_another_data_folder(tmp_path):
    """docs/guide/where-things-live.md: with ``DPCAUSAL_DATA`` set, ``dpcausal demo`` writes and
    registers its data under ``<data>/demo/``; ``dpcausal run conf/release/demo.yaml``, as the
    config's comment says, then re-runs it on those data (was: exit 2, "data.path differs from
    the registration": the config named the checkout's ``data/demo/experiment_a.csv``). Its own
    data folder and ledger, so the session's demo dataset is untouched."""
    from prefect.settings import PREFECT_API_URL

    data = tmp_path / "data"
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "DPCAUSAL_DATA": str(data),
           "DPCAUSAL_LEDGER_URL": f"sqlite:///{data / 'ledger.db'}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{data / 'mlflow.db'}"}

    def dpcausal(*args):
        return subprocess.run([sys.executable, "-m", "cli.main", *args, "--json",
                               "--no-progress"], capture_output=True, text=True, env=env,
                              timeout=300)

    demo = dpcausal("demo")
    assert demo.returncode == 0, demo.stderr
    assert (data / "demo" / "experiment_a.csv").is_file()
    rerun = dpcausal("run", str(SHIPPED_DEMO))
    assert rerun.returncode == 0, rerun.stderr
    released = [json.loads(out.stdout) for out in (demo, rerun)]
    assert [r["release"]["n"] for r in released] == [5000, 5000]
    assert [r["spent"]["n_charges"] for r in released] == [1, 2]
    assert released[1]["spent"]["ledger"] == str(data / "ledger.db")


def test_an_exception_in_a_task_prints_one_paragraph_and_leaves_no_process(cli_config, tmp_path):
    """A task that raises (MLflow cannot be reached) under a temporary Prefect server: exit 1,
    one Error paragraph naming what failed and where the log is; no process of the run survives
    it (the temporary server and its children carry the run's marker in their environment)."""
    import psutil

    dataset = "cli-task-raises"
    give_cap(dataset)
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    # a tracking server that fails, from the curator's deployment settings (a run's config may
    # not name one: issue 40 item 7)
    settings = tmp_path / "deployment.yaml"
    settings.write_text(yaml.safe_dump({"datasets": {dataset: {"mlflow": {
        "experiment": "x", "tracking_uri": "nosuchscheme://nowhere"}}}}))
    env |= {"DPCAUSAL_RUN_MARKER": marker, "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "DPCAUSAL_DEPLOYMENT_FILE": str(settings)}
    data = write_exp_a(tmp_path / "own.csv", 404)
    path = cli_config(data, ledger={"dataset_id": dataset})
    proc = subprocess.run([sys.executable, "-m", "cli.main", "run", path, "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith("Error: the release run failed (") and "private log" in err
    assert "Traceback" not in proc.stderr
    assert charges(dataset) == 0  # it failed before the reservation

    survivors = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("DPCAUSAL_RUN_MARKER") == marker:
                survivors.append(p.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    assert survivors == []


def test_a_release_under_a_temporary_server_links_no_flow_run(cli_config, tmp_path):
    """Issue 42 friction 3: the MLflow tag ``prefect.flow_run_url`` of a release run without a
    served stack pointed at the temporary Prefect server, gone once the command ended. It is
    left out there (the flow run's id stays, as ``prefect.flow_run_id``)."""
    from mlflow import MlflowClient

    dataset = "cli-temporary-server"
    give_cap(dataset)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    path = cli_config(ledger={"dataset_id": dataset})
    proc = subprocess.run([sys.executable, "-m", "cli.main", "run", path, "--no-progress",
                           "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tags = MlflowClient().get_run(json.loads(proc.stdout)["mlflow"]["run_id"]).data.tags
    assert tags["prefect.flow_run_id"] and "prefect.flow_run_url" not in tags


def test_a_set_typo_exits_2_blamed_on_set_with_the_closest_key(cli_config, invoke):
    out = invoke("run", cli_config(), "--set", "estimator.n_fold=10")
    _assert_error(out, 2, r"^Error: invalid --set: estimator\.n_fold: unknown key; did you mean "
                          r"estimator\.n_folds\? \[from --set estimator\.n_fold=10\]$")


def test_public_warnings_print_once_in_plain_words_before_the_charge(cli_config, tmp_path,
                                                                      invoke):
    """Too few rows per fold (2000 rows, K = 125: 16 < 20): one plain line on stderr, no Python
    warning source line; the release goes on and is charged once."""
    dataset = "cli-warns"
    give_cap(dataset)
    data = write_exp_a(tmp_path / "warns.csv", 405)
    out = invoke("run", cli_config(data, ledger={"dataset_id": dataset}), "--no-progress",
                 "--set", "estimator.n_folds=125")
    assert out.exit_code == 0, out.output
    lines = out.stderr.splitlines()
    assert [x for x in lines if "rows per fold" in x] == [
        x for x in lines if x.startswith("Warning: only 16 rows per fold")], out.stderr
    assert len([x for x in lines if "rows per fold" in x]) == 1, out.stderr
    assert "UserWarning" not in out.stderr and "warnings.warn" not in out.stderr
    assert charges(dataset) == 1


@pytest.mark.parametrize("setting, warning", [
    ("estimator.n_folds=125", "Warning: only 16 rows per fold"),
    # n = 2000, K = 20, zeta = 0.7: 1.96 sigma_1 = 2.67 > hi - lo = 2 (issue 21; tight sensitivity)
    ("estimator.zeta=0.7", "Warning: the privacy noise alone is wider than the outcome bounds: "
                           "the released ATE's noise has a 95% half-width of 2.67, more than "
                           "the whole range of ATEs the bounds [-1, 1] allow (+/-2)"),
])
def test_strict_refuses_a_release_whose_public_checks_warn(cli_config, tmp_path, invoke,
                                                           setting, warning):
    dataset = f"cli-strict-{setting.split('.')[1].split('=')[0]}"
    give_cap(dataset)
    data = write_exp_a(tmp_path / "strict.csv", 406 if "n_folds" in setting else 408)
    before = _flow_runs()
    out = invoke("run", cli_config(data, ledger={"dataset_id": dataset}), "--no-progress",
                 "--strict", "--set", setting)
    assert out.exit_code == 2, out.output
    assert out.stderr.splitlines() == [
        out.stderr.splitlines()[0],
        "Error: refused by --strict: 1 warning(s) above; nothing was charged"], out.stderr
    assert out.stderr.startswith(warning) and out.stdout == ""
    assert charges(dataset) == 0 and _flow_runs() == before
    # the planner's K for plain logistic/linear models (80 here; the default degree-2 models'
    # floor of 100 rows per fold gives K = 20): K = 20 at zeta 1.5 gives a CI 16x the
    # non-private one, which the planner calls not informative (issue 33 §5)
    ok = invoke("run", cli_config(data, ledger={"dataset_id": dataset}), "--no-progress",
                "--strict", "--set", "estimator.n_folds=auto", "--set",
                "models.propensity.name=logistic", "--set", "models.outcome.name=linear")
    assert ok.exit_code == 0 and "Warning" not in ok.stderr, ok.output
    assert charges(dataset) == 1


def test_run_prints_the_planners_warning_and_strict_refuses_on_it(cli_config, tmp_path, invoke):
    """Issue 33 §5: K = 20 at zeta 1.5 on 2000 rows (a CI 16x the non-private one at the widest
    spread the bounds allow) is what `plan` calls not informative: `run` says so once before
    the charge and releases; `--strict` refuses it (exit 2, nothing charged, no flow run)."""
    dataset = "cli-uninformative"
    give_cap(dataset)
    path = cli_config(write_exp_a(tmp_path / "uninformative.csv", 413),
                      ledger={"dataset_id": dataset})
    before = _flow_runs()
    strict = invoke("run", path, "--no-progress", "--strict")
    assert strict.exit_code == 2, strict.output
    assert strict.stderr.splitlines() == [
        "Warning: this release would not be informative: its CI is expected to be 16x wider "
        "than the non-private one (assumed: the widest spread the outcome bounds allow, so a "
        "narrower one makes it wider still). Raise zeta, add rows, or narrow the outcome bounds.",
        "Error: refused by --strict: 1 warning(s) above; nothing was charged"], strict.stderr
    assert charges(dataset) == 0 and _flow_runs() == before
    out = invoke("run", path, "--no-progress")
    assert out.exit_code == 0, out.output
    assert [x for x in out.stderr.splitlines() if x.startswith("Warning: ")] == \
        strict.stderr.splitlines()[:1]
    assert charges(dataset) == 1


def test_unchecked_bounds_are_noticed_once_before_the_charge_until_checked(cli_config, tmp_path,
                                                                           invoke):
    from dpcausal.bounds_check import BoundsCheck

    dataset = "cli-bounds-notice"
    give_cap(dataset, zeta=20.0)  # a zeta-GDP cap: the check is a Gaussian (GDP) charge
    data = write_exp_a(tmp_path / "notice.csv", 407)
    path = cli_config(data, ledger={"dataset_id": dataset})

    def notices(out):
        assert out.exit_code == 0, out.output
        return [x for x in out.stderr.splitlines() if x.startswith("Notice: ")]

    first = notices(invoke("run", path, "--no-progress"))
    assert first == [f"Notice: the outcome bounds [-1, 1] have never been checked on dataset "
                     f"'{dataset}'; outcomes outside them are clipped and bias the release. A "
                     "private check costs a small stated budget (zeta=0.1 under a zeta or rho "
                     "cap, epsilon=0.1 under an epsilon cap), charged to the ledger from Python: "
                     f"`with dpcausal.Ledger().charging('{dataset}'): "
                     "BoundsCheck(outcome_bounds=(-1, 1), zeta=0.1).fit(df, outcome='Y')` "
                     "(dpcausal.bounds_check)"]
    with Ledger() as led, led.charging(dataset):  # the notice's own call
        BoundsCheck(outcome_bounds=(-1, 1), zeta=0.1).fit(pd.read_csv(data), outcome="Y")
    assert notices(invoke("run", path, "--no-progress")) == []
    wider = notices(invoke("run", path, "--no-progress",
                           "--set", "estimator.outcome_bounds=[-2, 2]"))
    assert len(wider) == 1 and "[-2, 2] have never been checked" in wider[0]
    assert "BoundsCheck(outcome_bounds=(-2, 2), zeta=0.1)" in wider[0]
    # bounds [0, 1] alone declare nothing (issue 34 §2: they were copied onto a log wage)
    assert len(notices(invoke("run", path, "--no-progress",
                              "--set", "estimator.outcome_bounds=[0, 1]"))) == 1
    assert charges(dataset) == 5  # four releases and the check


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_an_interrupted_release_exits_non_zero_and_leaves_no_process(signum, cli_config,
                                                                     tmp_path):
    """SIGTERM (a scheduler stopping the job) and SIGINT (Ctrl-C) sent while the fold models are
    being fitted under a temporary Prefect server: one Error line, a non-zero exit, and no child
    of the CLI process (the temporary server included) outlives it."""
    import signal
    import threading
    import time

    import psutil

    dataset = f"cli-{signum.lower()}"
    give_cap(dataset)
    data = write_exp_a(tmp_path / "slow.csv", 408 + len(signum))
    path = cli_config(data, ledger={"dataset_id": dataset},
                      models={"outcome": {"name": "random_forest",
                                          "params": {"n_estimators": 300}}})
    # the marker below is a Prefect console log line: an earlier in-process CLI call of this
    # session has quietened the console through os.environ, which a child would inherit
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "run", path, "--no-progress",
                             "-v"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "Task run 'open_release_run" in line:  # the flow runs; the fits come next
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(240), "\n".join(lines)
    time.sleep(1.0)
    cli = psutil.Process(proc.pid)
    children = cli.children(recursive=True)
    assert children, "the temporary Prefect server should be a child of the CLI"
    proc.send_signal(getattr(signal, signum))
    code = proc.wait(timeout=120)
    reader.join(timeout=10)
    proc.stdout.close()
    output = "\n".join(lines)
    assert code != 0, output
    errors = [x for x in lines if x.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith("Error: the release run was interrupted"), \
        output
    assert "release_id" not in output and "ATE " not in output
    _, alive = psutil.wait_procs(children, timeout=30)
    assert alive == [], [p.cmdline() for p in alive]
