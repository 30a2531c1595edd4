"""examples/quickstart.ipynb runs from top to bottom (issue 20: documentation that runs)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def test_quickstart_notebook_executes(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not _outputs(nb), "the notebook is stored without outputs: CI produces them"
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = _outputs(nb)
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "release.plot() drew nothing"
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "fixed-effect pooling of 2 private releases" in text
    budgets = nb.cells[-1].outputs[0]["data"]["text/plain"]
    assert "site-A" in budgets and "site-B" in budgets
