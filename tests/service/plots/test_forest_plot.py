"""The forest plot of a meta-analysis writes a readable, non-empty PNG."""

from __future__ import annotations

import struct

import pytest

from dpcausal.meta import combine
from plots.meta import forest_plot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

STUDIES = [
    {"ate": 0.185, "variance": 0.00035, "zeta": 1.5, "n": 20000, "label": "Lyon"},
    {"ate": 0.154, "variance": 0.00040, "zeta": 1.5, "label": "Oslo"},
    {"ate": 0.130, "variance": 0.00030, "label": "Porto"},  # zeta unknown
    {"ate": -0.010, "variance": 0.00090, "zeta": 0.5, "label": "Turku"},
]


@pytest.mark.parametrize("kwargs", [
    {},
    {"model": "random", "weights": "paper_sqrt", "shared_people": ["Lyon", "Oslo"]},
    {"weights": [1, 1, 1, 0], "level": 0.9, "critical": "paper"},
])
def test_forest_plot_writes_a_png(tmp_path, kwargs):
    result = combine(STUDIES, **kwargs)
    out = forest_plot(result, tmp_path / "forest.png")
    assert out == tmp_path / "forest.png"
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000  # a drawn figure, not an empty canvas


def _png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # IHDR chunk
    return width, height


def test_forest_plot_height_grows_with_the_number_of_studies(tmp_path):
    many_studies = [dict(s, label=f"site {j}") for j, s in enumerate(STUDIES * 3)]
    few = _png_size(forest_plot(combine(STUDIES[:2]), tmp_path / "few.png"))
    many = _png_size(forest_plot(combine(many_studies), tmp_path / "many.png"))
    assert few[0] == many[0]
    assert many[1] > few[1] + 300
