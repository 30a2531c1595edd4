"""``dpcausal reproduce``: a mechanism's report written from the CLI; bad targets refused."""

from __future__ import annotations


def test_reproduce_a_mechanism_writes_its_report(tmp_path, invoke):
    out = invoke("reproduce", "cluster-dp", "--reps", "2", "--out-dir", str(tmp_path))
    assert out.exit_code == 0, out.output
    report = tmp_path / "cluster_dp.md"
    assert f"report written: {report}" in out.stdout
    text = report.read_text()
    assert "T1" in text and "Q7" in text
    assert sorted(p.name for p in (tmp_path / "figures").glob("cluster_dp_*.png"))


def test_reproduce_refuses_unknown_targets_and_bad_reps(invoke):
    out = invoke("reproduce", "E")
    assert out.exit_code == 2 and "'E' is not one of" in out.stderr
    out = invoke("reproduce", "federated", "--reps", "1")
    assert out.exit_code == 2 and "--reps" in out.stderr
