"""One charged-release path (issue 17; issue 27 §3): in the whole project (the library and every
package above it) exactly one function reserves and commits ledger charges, the one notebooks
and the Prefect task both call, and no per-kind copy of the pipeline is left."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("conf", "plots", "store", "demo", "reproduce", "tasks", "flows", "cli", "deploy")
LEDGERS = ("led", "ledger")


def _calls(attr: str, *on: str, extra: tuple[Path, ...] = ()) -> list[str]:
    """``path:function`` of every call ``<name>.<attr>(...)``, name in ``on``, in the library and
    the orchestration, and in the ``extra`` files (named by file name)."""
    found = []
    paths = [p for package in ("dpcausal", *PACKAGES)
             for p in sorted((ROOT / package).rglob("*.py"))]
    for path in [*paths, *extra]:
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == attr and isinstance(node.func.value, ast.Name)
                        and node.func.value.id in on):
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                    found.append(f"{where}:{fn.name}")
    return sorted(set(found))


def test_one_function_reserves_and_commits():
    assert _calls("release", *LEDGERS) == ["dpcausal/session.py:charged_release"]
    assert _calls("commit", "slot") == ["dpcausal/session.py:charged_release"]


def test_the_scanner_sees_a_second_reserving_place(tmp_path):
    """Negative control: a second place is found. It is written outside the checkout: planted in
    tasks/ it was seen by the test above when xdist ran the two at once."""
    planted = tmp_path / "_planted_twin.py"
    planted.write_text("def twin(led):\n    with led.release('d', 'r', None) as slot:\n"
                       "        slot.commit('x')\n")
    assert "_planted_twin.py:twin" in _calls("release", *LEDGERS, extra=(planted,))
    assert "_planted_twin.py:twin" in _calls("commit", "slot", extra=(planted,))


def test_no_per_kind_copy_of_the_pipeline_is_left():
    flows = {p.name for p in (ROOT / "flows").glob("*.py")}
    assert not flows & {"cluster_dp_release.py", "federated_release.py",
                        "user_level_release.py"}
    tasks = {p.name for p in (ROOT / "tasks").glob("*.py")}
    assert not tasks & {"cluster_dp.py", "federated.py", "user_level.py", "build.py",
                        "model_store.py", "progress.py"}
    text = "\n".join(p.read_text() for package in PACKAGES
                     for p in (ROOT / package).rglob("*.py"))
    assert text.count("_PRIVATE_TASK: dict") + text.count("_PRIVATE_TASK = ") == 1
    assert text.count("class _Strict(") == 1
    assert "import_module(f\"" not in text and "import_module(f'" not in text
