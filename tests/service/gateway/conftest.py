"""The gateway's tests import their stand-in stack (``_fake``) from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
