"""The working folder of a benchmark that runs flows: its own Prefect home and project data
folder (docs/guide/where-things-live.md), so a benchmark never touches the user's stores."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def isolated_workdir(given: str | None, prefix: str) -> Path:
    """``given``, else a fresh temporary folder; Prefect's home and ``DPCAUSAL_DATA`` point
    inside it and Prefect's telemetry is off."""
    work = Path(given or tempfile.mkdtemp(prefix=prefix))
    os.environ["PREFECT_HOME"] = str(work / "prefect")
    os.environ["DPCAUSAL_DATA"] = str(work / "data")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    (work / "prefect").mkdir(parents=True, exist_ok=True)
    return work
