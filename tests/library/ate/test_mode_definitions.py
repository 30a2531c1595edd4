"""Each set of public modes (sensitivity, sigma2, ci) is spelled once, in the module that
implements it; every check reads that one definition (issue 34: validation.py repeated the
sensitivity modes as a literal, so a new mode had to be added twice)."""

from __future__ import annotations

import ast
from pathlib import Path

import dpcausal
from dpcausal.ate.ci import CI_MODES
from dpcausal.ate.sensitivity import SENSITIVITY_MODES, SIGMA2_MODES

DEFINED_IN = {
    frozenset(SENSITIVITY_MODES): "ate/sensitivity.py",
    frozenset(SIGMA2_MODES): "ate/sensitivity.py",
    frozenset(CI_MODES): "ate/ci.py",
}


def _string_tuples(path: Path) -> list[tuple[int, frozenset[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) > 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            found.append((node.lineno, frozenset(e.value for e in node.elts)))  # type: ignore[attr-defined]
    return found


def test_every_mode_set_is_spelled_once() -> None:
    root = Path(dpcausal.__file__).parent
    repeats = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for line, values in _string_tuples(path):
            home = DEFINED_IN.get(values)
            if home is not None and rel != home:
                repeats.append(f"{rel}:{line} repeats {sorted(values)} (defined in {home})")
    assert not repeats, repeats

