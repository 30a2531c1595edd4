#!/usr/bin/env bash
# The library as a user gets it (issue 20): build the wheel, check that it installs exactly one
# top-level package, install it WITHOUT extras into an empty venv on the newest supported Python
# found (3.13, else 3.11), check that `import dpcausal` loads neither Prefect nor MLflow, run a
# release and a meta-analysis there, then the library's unit tests on that interpreter.
# Prints the wheel's size, its dependency count and the installed size of the environment.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export UV_PYTHON_DOWNLOADS=never
uv=$(command -v uv || echo "python3 -m uv")
work="$(mktemp -d "${TMPDIR:-/tmp}/dpcausal-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

find_python() {  # uv's discovery first, then pyenv's versions (its shims hide inactive versions)
  $uv python find "$1" 2>/dev/null && return
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -1 | grep .
}
py="$(find_python 3.13 || find_python 3.11)"

$uv build -q -o "$work/dist" "$here"  # sdist, then the wheel from it: no stale build/ files
wheel="$(ls "$work"/dist/dpcausal-*.whl)"
python3 - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
assert top == {"dpcausal"}, f"the wheel installs top-level entries {sorted(top)}, not only dpcausal"
for need in ("dpcausal/py.typed", "dpcausal/SPECS.md", "dpcausal/ledger/migrations/env.py",
             "dpcausal/ledger/migrations/versions/0001_schema_1.py"):
    assert need in names, f"the wheel lacks {need}"
EOF

$uv venv -q --python "$py" "$work/venv"
vpy="$work/venv/bin/python"
VIRTUAL_ENV="$work/venv" $uv pip install -q --compile-bytecode "$wheel"
ndeps=$(VIRTUAL_ENV="$work/venv" $uv pip list --format freeze 2>/dev/null | grep -vc '^dpcausal==')
echo "[wheel] $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB; Python $("$vpy" -c 'import platform; print(platform.python_version())'); $ndeps dependencies without extras; env $(du -sm "$work/venv" | cut -f1) MiB installed"

cd "$work"  # away from the checkout: dpcausal must come from the installed wheel
"$vpy" -P - <<'EOF'
import sys

import numpy as np

import dpcausal
from dpcausal import meta
from dpcausal.datasets import make_experiment_a

assert "site-packages" in dpcausal.__file__, dpcausal.__file__
assert dpcausal.__version__ != "0+unknown"
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"prefect", "mlflow", "matplotlib"})
assert not loaded, f"import dpcausal loaded {loaded}"

releases = []
for seed in (1, 2):
    X, A, Y, _ = make_experiment_a(n=2000, random_state=seed)
    releases.append(dpcausal.PrivateATE(outcome_bounds=(-1.0, 1.0), zeta=1.0).fit(X, A, Y))
pooled = meta.combine(releases)
assert np.isfinite(releases[0].ate) and np.isfinite(pooled.ate)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"prefect", "mlflow"})
assert not loaded, f"a release and a meta-analysis loaded {loaded}"
print(f"[wheel] release ate={releases[0].ate:.3f}, pooled ate={pooled.ate:.3f}: ok")
EOF

# an analyst's seat (issue 40): the wheel's `dpcausal ask` starts without the orchestration,
# Prefect, MLflow or scikit-learn
"$work/venv/bin/dpcausal" ask --help | grep -q DPCAUSAL_ASK_URL
"$vpy" -P -X importtime -c "import dpcausal; dpcausal.ask; from dpcausal.client import main" \
  2>"$work/importtime.txt"
if grep -Eq '\| +(sklearn|prefect|mlflow)(\.|$)' "$work/importtime.txt"; then
  echo "[wheel] dpcausal.ask imports scikit-learn, Prefect or MLflow" >&2; exit 1
fi
echo "[wheel] dpcausal ask: the library's command, without the orchestration: ok"

# the library tier, tests/library (it needs neither the orchestration nor Prefect/MLflow: this
# venv has neither, so the run also proves it); PYTHONPATH holds only the copied tests (their shared
# references), not the checkout
cp -r "$here/tests" "$here/pyproject.toml" "$work/"
# test tools, the extras some library tests exercise (plot, postgres, parquet), OpenDP (the
# reference samplers of tests/library/test_noise_vectorised.py), causaldata (the public
# job-training data of tests/library/ate/test_prerelease.py) and DoubleML (the non-private ATT
# reference of tests/library/ate/test_att.py)
VIRTUAL_ENV="$work/venv" $uv pip install -q --compile-bytecode pytest pytest-timeout hypothesis \
  statsmodels matplotlib "psycopg[binary]" pyarrow opendp==0.16.0 causaldata==0.1.5 \
  doubleml==0.11.4
PYTHONPATH="$work" "$vpy" -P -m pytest -q -p no:cacheprovider tests/library
