"""examples/quickstart.ipynb runs from top to bottom and teaches real use (issue 20: documentation
that runs; issue 25 §7: data with missing values, check_data, the plan's trade-off table, a
release through a ledger, a refusal, the ledger's history, what epsilon means, two sites pooled;
issue 33 §6: a randomized trial released with estimator="auto")."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[3] / "examples" / "quickstart.ipynb"


def _outputs(cells: list) -> list[dict]:
    return [out for cell in cells if cell.cell_type == "code" for out in cell.outputs]


def _text(outputs: list[dict]) -> str:
    return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not _outputs(nb.cells), "the notebook is stored without outputs: CI produces them"
    home = tmp_path_factory.mktemp("home")
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(home)}}).execute()
    return nb


def _cell(nb: nbformat.NotebookNode, call: str) -> str:
    """The output text of the one code cell whose source makes ``call``."""
    cells = [c for c in nb.cells if c.cell_type == "code" and call in c.source]
    assert len(cells) == 1, f"expected one cell calling {call!r}"
    return _text(cells[0].outputs)


def test_runs_without_errors_and_plots(executed: nbformat.NotebookNode) -> None:
    outputs = _outputs(executed.cells)
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "pooled.plot() drew nothing"


def test_check_data_reports_the_missing_values_as_non_private(
        executed: nbformat.NotebookNode) -> None:
    text = _cell(executed, ".check_data(")
    assert "NON-PRIVATE" in text
    missing = re.search(r"rows with a missing covariate\s+(\d+)", text)
    assert missing and int(missing.group(1)) > 0
    unusable = re.search(r"rows without a usable treatment or outcome\s+(\d+)", text)
    assert unusable and int(unusable.group(1)) > 0


def test_plan_shows_the_trade_off_not_one_row(executed: nbformat.NotebookNode) -> None:
    text = _cell(executed, ".plan(")
    rows = [line for line in text.splitlines() if re.match(r"\s*\d+\s+\d+\s+\d+\s", line)]
    assert len(rows) >= 5, text
    assert "True" in text and "False" in text  # recommended / infeasible rows are both shown


def test_second_release_is_refused_and_history_holds_one_charge(
        executed: nbformat.NotebookNode) -> None:
    refusal = _cell(executed, "except BudgetExceededError")
    assert "Refused: budget exhausted for dataset clinic-A" in refusal
    assert "nothing was charged" in refusal
    history = _cell(executed, "ledger.history(")
    assert history.count("committed") == 1, history


def test_epsilon_sentence_uses_the_release_figures(executed: nbformat.NotebookNode) -> None:
    release = _cell(executed, 'ledger.fit("clinic-A", ate, site_a, **roles)\nprint(release_a)')
    stated = re.search(r"\(([\d.]+), 1\.0e-05\)-DP per row", release)
    sentence = _cell(executed, "release_a.privacy")
    assert stated and f"epsilon={float(stated.group(1)):.2f}" in sentence


def test_two_sites_pooled_and_labelled_by_dataset(executed: nbformat.NotebookNode) -> None:
    text = _cell(executed, "meta.combine(")
    assert "fixed-effect pooling of 2 private releases" in text
    labels = [line.split()[0] for line in text.splitlines() if line.startswith("clinic-")]
    assert labels == ["clinic-A", "clinic-B"]


def test_a_shuffled_copy_under_another_id_is_refused(executed: nbformat.NotebookNode) -> None:
    """Issue 32 item 7: the notebook shows the library binding its data to the dataset id."""
    text = _cell(executed, '"clinic-A-copy"')
    assert "Refused:" in text and "already budgeted as dataset 'clinic-A'" in text
    assert re.search(r"keyed fingerprint of site A: [0-9a-f]{32}", text)


def test_a_randomized_trial_is_released_by_auto_s_choice(executed: nbformat.NotebookNode
                                                         ) -> None:
    """Issue 33: with design="randomized" the comparison shows the ensemble, dim and lin, and
    auto's choice is an estimator from noisy sums, whose release states its assumption."""
    compared = _cell(executed, ".compare_estimators(")
    rows = {line.split()[1]: line for line in compared.splitlines()
            if re.match(r"\s*\d+\s+(aipw|dim|lin)\s", line)}
    assert set(rows) == {"aipw", "dim", "lin"}, compared
    [chosen] = [name for name, line in rows.items() if line.rstrip().endswith("True")]
    assert chosen in ("dim", "lin")
    release = _cell(executed, 'ledger.fit("trial-1"')
    assert chosen.upper() in release and "randomized assignment (declared design)" in release
