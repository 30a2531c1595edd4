"""Release configs: loading, dotted overrides, and one-paragraph errors for bad input."""

from pathlib import Path

import pytest
import yaml

import conf
from conf.kinds import kind_of, load_any
from conf.models import ConfigError, ReleaseConfig, apply_override, load_config, with_absolute_paths

DEMO = Path(conf.__file__).parent / "release" / "demo.yaml"
EXAMPLES = sorted((Path(conf.__file__).parent / "release").glob("*.yaml"))


def _minimal(**extra):
    return {"data": {"path": "d.csv"}, "columns": {"treatment": "A", "outcome": "Y"},
            "ledger": {"dataset_id": "ds"}, **extra}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_validate(path):
    """Every shipped config validates as the kind it declares (the core kind when none)."""
    declared = yaml.safe_load(path.read_text()).get("kind", "ate")
    assert kind_of(path) == declared
    cfg = load_any(path)
    assert cfg.kind == declared and Path(cfg.data.path).is_absolute()
    if declared == "ate":
        assert isinstance(cfg, ReleaseConfig) and cfg.mode == "release"


def test_unknown_kind_is_refused_in_one_paragraph(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"kind": "laplace", **_minimal()}))
    with pytest.raises(ConfigError, match=r"kind 'laplace' is not one of .*cluster_dp"):
        load_any(path)


def test_kind_can_be_overridden_and_then_validates_as_that_kind():
    with pytest.raises(ConfigError, match="kind: Input should be 'ate'"):
        load_config(DEMO, ["kind=federated"])
    with pytest.raises(ConfigError, match="invalid .*demo.yaml"):
        load_any(DEMO, ["kind=federated"])  # a core config is not a valid federated one


def test_at_least_two_examples_ship():
    assert {p.name for p in EXAMPLES} >= {"demo.yaml"} and len(EXAMPLES) >= 2


def test_demo_values_are_read():
    cfg = load_config(DEMO)
    assert (cfg.estimator.estimator, cfg.estimator.n_folds) == ("aipw", 200)
    assert cfg.models.propensity.name == "logistic" and cfg.models.outcome.name == "linear"
    assert cfg.ledger.dataset_id == "demo-experiment-a"


def test_dotted_overrides_are_typed_and_validated():
    cfg = load_config(DEMO, ["estimator.zeta=0.5", "runner.kind=dask", "runner.address=tcp://localhost:1",
                             "models.outcome.params.fit_intercept=false", "estimator.n_folds=auto"])
    assert cfg.estimator.zeta == 0.5 and cfg.runner.kind == "dask"
    assert cfg.runner.address == "tcp://localhost:1"
    assert cfg.models.outcome.params == {"fit_intercept": False}
    assert cfg.estimator.n_folds == "auto"


def test_override_does_not_mutate_input():
    raw = {"a": {"b": 1}}
    out = apply_override(raw, "a.c=2")
    assert raw == {"a": {"b": 1}} and out == {"a": {"b": 1, "c": 2}}


def test_library_kwargs_pass_only_set_values_and_the_fold_seed():
    cfg = ReleaseConfig.model_validate(_minimal(estimator={"zeta": 1.0, "fold_seed": 9}))
    assert cfg.estimator.library_kwargs() == {"estimator": "auto", "design": "observational",
                                              "estimand": "ate", "zeta": 1.0, "random_state": 9}


@pytest.mark.parametrize("override, match", [
    ("estimator.zeta=abc", r"estimator\.zeta: Input should be a valid number.*'abc'"),
    ("bogus=1", r"bogus: unknown key"),
    ("estimator.estimator=dml", r"estimator\.estimator: Input should be 'auto', 'aipw', 'ipw', "
                                r"'g', 'dim' or 'lin'"),
    ("models.outcome.name=nosuch", r"unknown outcome model 'nosuch'"),
    ("models.propensity.name=linear", r"model 'linear' cannot be a propensity model"),
    ("runner.kind=processes", r"runner\.kind"),
    ("noise_seed=3", r"noise_seed is only allowed in evaluation mode"),
    ("estimator.sensitivity=released_code", r"not a valid privacy bound"),
    ("name=has space", r"name: String should match pattern"),
    ("novalue", r"--set expects key=value"),
    ("data.dtypes.Y=complex", r"data\.dtypes\.Y: Input should be 'float', 'int', 'bool' or 'str'"),
])
def test_bad_values_raise_one_paragraph_config_errors(override, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config(DEMO, [override])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("override, near", [
    ("estimator.zetta=1", "estimator.zeta"),
    ("zeta=1", "estimator.zeta"),
    ("columns.treatmnt=A", "columns.treatment"),
    ("ledger.dataset=x", "ledger.dataset_id"),
])
def test_a_set_typo_is_blamed_on_set_and_names_the_closest_key(override, near):
    with pytest.raises(ConfigError) as err:
        load_config(DEMO, [override])
    assert str(err.value).startswith("invalid --set: "), err.value
    assert f"unknown key; did you mean {near}? [from --set {override}]" in str(err.value)
    assert str(DEMO) not in str(err.value)


def test_a_bad_set_value_is_blamed_on_set_and_a_file_error_on_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^invalid --set: estimator\.zeta: .*'abc'.*"
                       r"\[from --set estimator\.zeta=abc\]$"):
        load_config(DEMO, ["estimator.zeta=abc"])
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(_minimal(estimator={"zetta": 1.0})))
    with pytest.raises(ConfigError) as err:
        load_config(path, ["estimator.estimator=ipw"])
    assert str(err.value) == (f"invalid {path}: estimator.zetta: unknown key; did you mean "
                              "estimator.zeta?")
    with pytest.raises(ConfigError, match=r"^invalid --set kind=laplace: kind 'laplace'"):
        load_any(path, ["kind=laplace"])


def test_noise_seed_allowed_in_evaluation_mode():
    assert load_config(DEMO, ["mode=evaluation", "noise_seed=3"]).noise_seed == 3


def test_missing_file_and_invalid_yaml(tmp_path):
    with pytest.raises(ConfigError, match=r"config file .*nope\.yaml' does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncolumns: [unclosed\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML") as err:
        load_config(bad)
    assert "\n" not in str(err.value)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match=r"must hold a mapping of settings, got str"):
        load_config(scalar)


@pytest.mark.parametrize("data, match", [
    ({}, r"give exactly one of data\.path"),
    ({"path": "a.csv", "sql": "select 1", "url": "sqlite://"}, r"give exactly one of data\.path"),
    ({"sql": "select 1"}, r"data\.sql needs exactly one of data\.url"),
    ({"path": "a.xlsx"}, r"data\.path must end in \.csv or \.parquet"),
    ({"partitions": "parts/", "id_column": "id", "dtypes": {"Y": "float"}},
     r"data\.dtypes does not apply to data\.partitions"),
])
def test_data_source_rules(data, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, base=_minimal(data=data))


def test_relative_data_path_made_absolute(tmp_path):
    cfg = with_absolute_paths(ReleaseConfig.model_validate(_minimal()), tmp_path)
    assert cfg.data.path == str(tmp_path / "d.csv")
    assert with_absolute_paths(cfg, Path("/elsewhere")).data.path == str(tmp_path / "d.csv")


def test_default_experiment_is_per_dataset():
    cfg = ReleaseConfig.model_validate(_minimal())
    assert cfg.experiment_name == "dpcausal/ds"
    assert ReleaseConfig.model_validate(_minimal(mlflow={"experiment": "e"})).experiment_name == "e"


def test_a_data_path_in_a_config_file_is_relative_to_the_file(tmp_path, monkeypatch):
    """Issue 25 §6: ``data.path`` in a config resolves against the config file's folder, not the
    working directory; a path given by ``--set`` is the user's, relative to the working
    directory."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "release.yaml").write_text(yaml.safe_dump(_minimal(data={"path": "d.csv"})))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_any("../study/release.yaml").data.path == str(folder / "d.csv")
    assert load_any(folder / "release.yaml", ["data.path=x.csv"]).data.path == \
        str(elsewhere / "x.csv")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_configs_find_their_data_from_any_folder(path, tmp_path, monkeypatch):
    """The demo configs name their data under the data folder, where ``dpcausal demo`` writes
    them, which ``DPCAUSAL_DATA`` moves (docs/guide/where-things-live.md), from a file or a
    ``--set``; the others name the checkout's ``data/``."""
    from conf.kinds import KINDS

    monkeypatch.chdir(tmp_path)
    moved = (tmp_path / "moved").resolve()
    monkeypatch.setenv("DPCAUSAL_DATA", str(moved))
    config = load_any(path)
    root = Path(conf.__file__).resolve().parents[1]
    demos = {Path(kind.example).name for kind in KINDS.values()}
    folder = moved if path.name in demos else root / "data"
    assert Path(config.data.path).resolve().is_relative_to(folder)
    assert load_any(path, ["data.path=<data>/x.csv"]).data.path == str(moved / "x.csv")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_config_comments_agree_with_behaviour(path):
    """Issue 25 §6: no fold_seed in a release config (a release draws secret folds), a ledger
    cap in a config is only the cap a refusal suggests, and `auto` is the planner's K."""
    raw = yaml.safe_load(path.read_text())
    text = path.read_text()
    if raw.get("mode", "release") == "release":
        assert "fold_seed" not in (raw.get("estimator") or {})
    ledger_lines = text.split("\nledger:", 1)[1].split("\nmlflow:", 1)[0]
    assert "cap set the first time" not in ledger_lines
    if "budget:" in ledger_lines or "epsilon:" in ledger_lines:
        assert "never creates a cap" in ledger_lines
    assert "min(500" not in text


def test_renamed_config_keys_still_load_with_a_warning():
    """estimate.level (cluster_dp) and mechanism.bounds (user_level) are the old names of
    estimate.alpha (= 1 - level) and mechanism.outcome_bounds (issue 27 §5)."""
    folder = Path(conf.__file__).parent / "release"
    raw = yaml.safe_load((folder / "cluster_dp_demo.yaml").read_text())
    raw["estimate"] = {"strata": "clusters", "level": 0.9}
    with pytest.warns(DeprecationWarning, match="estimate.level is deprecated"):
        assert load_any(None, base=raw).estimate.alpha == pytest.approx(0.1)
    raw["estimate"]["alpha"] = 0.1
    with pytest.raises(ConfigError, match="old name of estimate.alpha"):
        load_any(None, base=raw)
    raw = yaml.safe_load((folder / "user_level_demo.yaml").read_text())
    raw["mechanism"]["bounds"] = raw["mechanism"].pop("outcome_bounds")
    with pytest.warns(DeprecationWarning, match="mechanism.bounds is deprecated"):
        assert load_any(None, base=raw).mechanism.outcome_bounds == (0, 65)


# ------------------------------------------------------------------ issue 33 §6: the estimator keys
def test_the_estimator_keys_default_to_auto_in_an_observational_design_and_reach_the_library():
    from conf.kinds import build_mechanism

    assert (ReleaseConfig.model_validate(_minimal()).estimator.estimator,
            ReleaseConfig.model_validate(_minimal()).estimator.design) == ("auto", "observational")
    cfg = ReleaseConfig.model_validate(_minimal(
        columns={"treatment": "A", "outcome": "Y", "covariates": ["age", "score"]},
        estimator={"estimator": "lin", "design": "randomized", "outcome_bounds": [0, 1],
                   "outcome_sd": 0.3, "covariate_bounds": {"age": [18, 80], "score": [0, 10]}}))
    params = build_mechanism(cfg).get_params()
    assert (params["estimator"], params["design"], params["outcome_sd"]) == (
        "lin", "randomized", 0.3)
    assert {k: tuple(v) for k, v in params["covariate_bounds"].items()} == {
        "age": (18.0, 80.0), "score": (0.0, 10.0)}
    pairs = ReleaseConfig.model_validate(_minimal(estimator={
        "estimator": "lin", "assume_linear": True, "covariate_bounds": [[18, 80], [0, 10]]}))
    assert build_mechanism(pairs).get_params()["assume_linear"] is True
    assert [tuple(b) for b in build_mechanism(pairs).get_params()["covariate_bounds"]] == [
        (18.0, 80.0), (0.0, 10.0)]


@pytest.mark.parametrize("overrides, match", [
    (["estimator.estimator=dim"],
     r"^invalid --set: estimator: estimator='dim' \(difference in means\) is valid only in a "
     r"randomized design, got design='observational': declare design='randomized'"),
    (["estimator.design=trial"],
     r"estimator\.design: Input should be 'observational' or 'randomized'"),
    (["estimator.estimator=lin"],
     r"estimator: estimator='lin' in an observational design assumes each arm's outcome is "
     r"linear in the covariates .* \(config: estimator\.assume_linear: true\)"),
    (["estimator.estimator=lin", "estimator.assume_linear=true"],
     r"estimator: estimator='lin' needs covariate_bounds: a mapping column -> \(lo, hi\)"),
    (["estimator.assume_linear=1"], r"estimator\.assume_linear: Input should be a valid boolean"),
    (["estimator.treated_share=1"], r"estimator\.treated_share: Input should be less than 1"),
    (["estimator.covariate_bounds={X1: [1, -1]}"],
     r"estimator: covariate_bounds\[0\] must be finite with low < high, got \(1\.0, -1\.0\)"),
    (["estimator.covariate_bounds={age: [0, 1]}"],
     r"estimator\.covariate_bounds must name exactly the covariates of columns\.covariates "
     r"\(X1\): missing \['X1'\], not covariates \['age'\]"),
    (["estimator.covariate_bounds=[[0, 1], [0, 1]]"],
     r"estimator\.covariate_bounds gives 2 pairs for 1 covariates in columns\.covariates"),
    (["estimator.outcome_sd=1.5"],
     r"estimator: outcome_sd=1\.5 exceeds half the width of the outcome bounds"),
    (["estimator.outcome_sd=0"], r"estimator\.outcome_sd: Input should be greater than 0"),
    (["estimator.estimator=ipw", "estimator.estimand=att"],
     r"estimator: estimand='att' is not available for estimator='ipw'"),
    (["estimator.estimand=atc"], r"estimator\.estimand: Input should be 'ate' or 'att'"),
])
def test_the_estimator_keys_are_refused_in_one_paragraph_naming_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config(DEMO, overrides)
    assert "\n" not in str(err.value)


def test_a_randomized_design_allows_dim_and_the_bounds_may_be_pairs():
    cfg = load_config(DEMO, ["estimator.estimator=dim", "estimator.design=randomized",
                             "estimator.covariate_bounds=[[-3, 3]]", "estimator.outcome_sd=0.5"])
    assert (cfg.estimator.estimator, cfg.estimator.design) == ("dim", "randomized")
    assert cfg.estimator.covariate_bounds == [(-3.0, 3.0)] and cfg.estimator.outcome_sd == 0.5


def test_propensity_clip_auto_is_a_config_value():
    """Issue 39: ``estimator.propensity_clip: auto`` (the library default when unset) reaches
    the library; the planner's eta is written back like K (``planned_params``)."""
    from conf.kinds import build_mechanism

    cfg = load_config(DEMO, ["estimator.propensity_clip=auto"])
    assert cfg.estimator.propensity_clip == "auto"
    est = build_mechanism(cfg)
    assert est.propensity_clip == "auto"
    assert est.planned_params(5000, 1)["propensity_clip"] == pytest.approx(
        2 * (1 / 5000 + 1 / 199) ** 0.5 / 1.5 ** 0.5, rel=1e-12)   # K = 200, zeta = 1.5
    with pytest.raises(ConfigError, match="propensity_clip"):
        load_config(DEMO, ["estimator.propensity_clip=tight"])


def test_the_estimand_reaches_the_library_and_the_ledger_detail():
    """``estimator.estimand`` (issue 39 item 7): ``ate`` by default, ``att`` passed to
    PrivateATE and recorded in the ledger's detail."""
    from conf.kinds import KINDS, build_mechanism

    default = load_config(DEMO)
    assert default.estimator.estimand == "ate"
    assert KINDS["ate"].detail(default)["estimand"] == "ate"
    att = load_config(DEMO, ["estimator.estimand=att"])
    assert build_mechanism(att).get_params()["estimand"] == "att"
    assert KINDS["ate"].detail(att)["estimand"] == "att"
