from __future__ import annotations

import sys
from pathlib import Path

# The helper module sits next to the tests; make it importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))
