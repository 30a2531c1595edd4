"""The declarations and planning facts through the CLI (issue 39 items 1, 5 and 6): an explicit
``lin`` in an observational design without ``estimator.assume_linear`` exits 2 naming the key
with nothing charged; ``plan`` states the planning facts it assumed and where they come from
(its options, the config, the curator's registration, or the defaults), and which declaration
would change ``auto``'s choice; ``run --dry-run --strict`` judges a ``dim`` release by dim's
own plan, not the ensemble's noise. No Prefect server: these run in-process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.main import main
from dpcausal.ledger import Ledger

DEMO = "conf/release/demo.yaml"
TRIAL = "conf/release/trial_dim.yaml"
BOUNDS = "estimator.covariate_bounds={age: [18, 80], score: [0, 10], site: [0, 1]}"


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


def _charges(url, dataset="trial-dim-demo"):
    with Ledger(url, create=True) as led:
        return led.spent(dataset).n_charges


def test_explicit_lin_in_an_observational_design_exits_2_naming_the_key(trial):
    trial["register"]()
    with Ledger(trial["ledger"], create=True) as led:
        led.set_budget("trial-dim-demo", zeta=5.0)
    asked = [*trial["args"], "--set", "estimator.estimator=lin", "--set",
             "estimator.design=observational", "--set", BOUNDS]
    for command in (["run", "--dry-run"], ["run"], ["plan"]):
        out = _invoke(*command, TRIAL, *asked)
        assert out.exit_code == 2, out.output
        assert "estimator.assume_linear: true" in out.output
    assert _charges(trial["ledger"]) == 0
    declared = _invoke("run", "--dry-run", TRIAL, *asked, "--set", "estimator.assume_linear=true")
    assert declared.exit_code == 0, declared.output
    assert _charges(trial["ledger"]) == 0


def test_plan_keeps_the_ensemble_and_says_what_a_declaration_would_change(trial):
    trial["register"]()
    observational = [*trial["args"], "--set", "estimator.estimator=auto",
                     "--set", "estimator.design=observational", "--set", BOUNDS]
    out = _invoke("plan", TRIAL, *observational)
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())     # plan wraps its lines at 100 columns (issue 42)
    assert flat.startswith("Plan for") and "estimator=auto -> aipw" in flat.split("Estimators")[0]
    assert not [line for line in out.output.splitlines() if line.split()[:1] == ["lin"]]
    doc = json.loads(_invoke("plan", TRIAL, *observational, "--json").output)
    assert doc["estimator"] == "aipw" and "lin" not in [r["estimator"] for r in doc["estimators"]]
    changes = {c["declare"]: c for c in doc["declarations"]}
    assert changes["assume_linear: true"]["estimator"] == "lin"
    assert changes["design: randomized"]["estimator"] in ("dim", "lin")
    # the half-width the plan promises under the declaration is the declared plan's own
    declared = json.loads(_invoke("plan", TRIAL, *observational, "--set",
                                  "estimator.assume_linear=true", "--json").output)
    assert declared["estimator"] == "lin"
    assert changes["assume_linear: true"]["halfwidth"] == pytest.approx(
        declared["recommended"]["halfwidth"])
    said = flat[flat.index("Declaring assume_linear"):]
    said = said[:said.index("Declare it only if it is true of the study.")]
    assert f"would let auto take lin: expected 95% CI half-width " \
           f"{changes['assume_linear: true']['halfwidth']:.4g}" in said


def test_plan_states_the_planning_facts_it_assumed_and_their_source(trial):
    trial["register"]()
    args = ["plan", TRIAL, *trial["args"], "--set", "estimator.estimator=auto"]
    default = _invoke(*args)
    assert default.exit_code == 0, default.output
    def flat(out):  # plan wraps its lines at 100 columns (issue 42)
        return " ".join(out.output.split())
    assert "(planning facts assumed: treated share 1/2, default (none declared); outcome " \
           "spread worst case of the bounds (sd = 0.5), default (none declared))" in flat(default)
    stated = _invoke(*args, "--treated-share", "0.2", "--outcome-sd", "0.3")
    assert "treated share 0.2, stated (--treated-share)" in flat(stated)
    assert "outcome spread stated outcome_sd = 0.3, stated (--outcome-sd)" in flat(stated)
    config = _invoke(*args, "--set", "estimator.treated_share=0.3", "--json")
    assert json.loads(config.output)["facts"]["treated_share"] == {
        "value": 0.3, "source": "stated (estimator.treated_share)"}
    assert _invoke(*args, "--treated-share", "1.5").exit_code == 2
    # a fact the curator registers public is taken where the run states none
    trial["register"](planning={"treated_share": 0.05})
    registered = json.loads(_invoke(*args, "--json").output)
    assert registered["facts"]["treated_share"] == {"value": 0.05,
                                                    "source": "registered by the curator"}
    plain = {r["estimator"]: r["halfwidth"] for r in json.loads(
        _invoke(*args, "--treated-share", "0.5", "--json").output)["estimators"]}
    rare = {r["estimator"]: r["halfwidth"] for r in registered["estimators"]}
    assert rare["dim"] > 2 * plain["dim"]          # 5% treated: a far wider difference in means
    overridden = json.loads(_invoke(*args, "--set", "estimator.treated_share=0.4",
                                    "--json").output)
    assert overridden["facts"]["treated_share"]["value"] == 0.4
    assert "'treated_share': 0.05" in _invoke("ledger", "show", "trial-dim-demo").output


def test_the_registration_refuses_a_planning_fact_out_of_range(trial):
    from dpcausal.ledger import Registration

    with pytest.raises(ValueError, match=r"treated_share must be a number in \(0, 1\)"):
        Registration("d", {}, {}, 10, facts={"treated_share": 1.0})
    with pytest.raises(ValueError, match="outcome_sd must be a finite number > 0"):
        Registration("d", {}, {}, 10, facts={"outcome_sd": -1})
    config = trial["config"]
    out = _invoke("ledger", "register", "trial-dim-demo", config, "--treated-share", "0")
    assert out.exit_code == 2, out.output
    assert "treated_share must be a number in (0, 1)" in out.output
    with Ledger(trial["ledger"], create=True) as led:
        assert led.registration("trial-dim-demo") is None
    out = _invoke("ledger", "register", "trial-dim-demo", config, "--treated-share", "0.5",
                  "--outcome-sd", "0.2")
    assert out.exit_code == 0, out.output
    with Ledger(trial["ledger"]) as led:
        facts = led.registration("trial-dim-demo").facts
    assert (facts["treated_share"], facts["outcome_sd"]) == (0.5, 0.2)


def test_strict_judges_a_dim_release_by_dims_own_plan(trial):
    trial["register"]()
    with Ledger(trial["ledger"], create=True) as led:
        led.set_budget("trial-dim-demo", zeta=5.0)
    # zeta = 0.01: the ensemble's noise would be wider than the outcome bounds; dim's expected
    # CI is about 7x the non-private one: informative, no warning
    small = _invoke("run", "--dry-run", "--strict", TRIAL, *trial["args"],
                    "--set", "estimator.zeta=0.01")
    assert small.exit_code == 0, small.output
    assert "Warning" not in small.output and "almost nothing" not in small.output
    # zeta = 0.001: dim's own plan is not informative (about 67x): plan and run say so
    tiny = ["--set", "estimator.zeta=0.001"]
    planned = _invoke("plan", TRIAL, *trial["args"], *tiny)
    assert planned.exit_code == 0, planned.output
    assert "Warning: this release would not be informative" in planned.output
    refused = _invoke("run", "--dry-run", "--strict", TRIAL, *trial["args"], *tiny)
    assert refused.exit_code == 2, refused.output
    assert "would not be informative" in refused.output
    assert "almost nothing" not in refused.output    # the ensemble's check is not dim's
    assert _charges(trial["ledger"]) == 0


def test_a_registered_outcome_sd_is_taken_within_the_bounds_and_reaches_the_release_checks(
        trial):
    from conf.kinds import KINDS, load_any

    args = ["plan", TRIAL, *trial["args"], "--json"]
    trial["register"](planning={"outcome_sd": 0.8})     # wider than the bounds [0, 1] allow
    assert json.loads(_invoke(*args).output)["facts"]["outcome_sd"] == {"value": None,
                                                                        "source": "default"}
    reg = trial["register"](planning={"outcome_sd": 0.2, "treated_share": 0.25})
    doc = json.loads(_invoke(*args).output)
    assert doc["facts"]["outcome_sd"] == {"value": 0.2, "source": "registered by the curator"}
    assert {r["outcome_spread"] for r in doc["estimators"]} == {"stated outcome_sd = 0.2"}
    # a release checked from the registration alone (a deployment's run) plans on them too
    config = load_any(TRIAL, trial["args"][1:2])
    mechanism = KINDS["ate"].build(config)
    assert (mechanism.treated_share, mechanism.outcome_sd) == (None, None)
    KINDS["ate"].public(mechanism, KINDS["ate"].roles(config), reg)
    assert (mechanism.treated_share, mechanism.outcome_sd) == (0.25, 0.2)
    assert mechanism.public_params(2000, 3)["treated_share"] == 0.25
