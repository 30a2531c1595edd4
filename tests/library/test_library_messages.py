"""Messages raised or warned inside the library name Python calls (``Ledger.set_budget``,
``PrivateATE(...).plan``), not the CLI of the checkout, which a wheel install does not have
(issue 25 §6); the plot hint installs what a wheel user can install."""

import ast
import re
from pathlib import Path

import pytest

import dpcausal

CLI = re.compile(r"dpcausal (ledger [a-z-]+ ?[A-Z.]|ledger set-budget|plan|run|demo|serve|"
                 r"check-data|meta|reproduce)\b|\./dev\b|--url\b|dpcausal\[")


def _message_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module outside its docstrings (messages, not documentation)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_library_message_names_a_cli_command():
    root = Path(dpcausal.__file__).parent
    found = [f"{p.relative_to(root)}:{line}: {text!r}" for p in sorted(root.rglob("*.py"))
             if "migrations" not in p.parts
             for line, text in _message_strings(p) if CLI.search(text)]
    assert found == []


def test_budget_messages_name_the_python_call(tmp_path):
    from dpcausal.ledger import BudgetExceededError, Ledger

    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", create=True) as led:
        with pytest.raises(ValueError, match=r"`Ledger\.set_budget\('nope', zeta=\.\.\.\)`"):
            led.spent("nope")
    err = BudgetExceededError("trial", "1", "1", "1.2", "1.41")
    assert "`Ledger.set_budget('trial', ...)`" in str(err)


def test_noise_warning_points_to_the_planner_method():
    from dpcausal.validation import NoiseWiderThanBoundsWarning, check_noise_scale

    with pytest.warns(NoiseWiderThanBoundsWarning, match=r"`PrivateATE\(\.\.\.\)\.plan\(n, d\)`"):
        check_noise_scale(5.0, (0.0, 1.0))
