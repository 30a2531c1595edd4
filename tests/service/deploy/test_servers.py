"""`dpcausal serve`/`stop` find a service's processes by process group through psutil."""

from __future__ import annotations

import os
import subprocess
import sys

from deploy.servers import _pgid_alive


def test_pgid_alive_lists_the_group_until_it_ends() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    try:
        pgid = os.getpgid(proc.pid)
        assert pgid != os.getpgid(0)
        assert _pgid_alive(pgid) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert _pgid_alive(pgid) == []
