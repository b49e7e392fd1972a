"""Where the project, the data and the shared specification folder are."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TAGURU_EVAL_SHARED", PROJECT_ROOT.parent / "shared"))
VECTORS = SHARED / "vectors"
WIRE = SHARED / "contract" / "wire"
EXAMPLES = SHARED / "contract" / "examples"
DATA = PROJECT_ROOT / "data"
TEST_DATA = PROJECT_ROOT / "tests" / "data"
