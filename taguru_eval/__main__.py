"""``python -m taguru_eval``: the command line."""

from __future__ import annotations

import sys

from taguru_eval.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
