"""Result dataclasses: JSON conversion and the readable text summary."""

import dataclasses
import json
import math

import numpy as np

from dpcausal._results import ResultMixin


@dataclasses.dataclass(frozen=True)
class _Result(ResultMixin):
    ate: float
    ci: tuple[float, float]
    n: int
    privacy: dict
    per_row: np.ndarray
    note: str = "x"
    flag: bool = False


def _example(**kw):
    base = dict(ate=np.float64(0.25), ci=(np.float64(0.1), 0.4), n=np.int64(7),
                privacy={"epsilon": 1.5, "delta": 1e-6, "order": 22.0},
                per_row=np.arange(10.0))
    return _Result(**base | kw)


def test_to_dict_is_plain_json_with_nonfinite_as_none():
    d = _example(ate=math.nan).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["ate"] is None and type(d["n"]) is int and d["ci"] == [0.1, 0.4]


def test_summary_shows_scalars_the_ci_and_epsilon_delta_but_not_long_arrays():
    text = str(_example())
    lines = dict(line.split(None, 1) for line in text.splitlines()[2:])
    assert lines["ate"] == "0.25" and lines["n"] == "7" and lines["flag"] == "False"
    assert lines["ci"] == "[0.1, 0.4]"
    assert lines["privacy"] == "(1.5, 1e-06)-DP"
    assert "per_row" not in lines  # ten values: not a summary row
    assert text.splitlines()[0] == "_Result"
