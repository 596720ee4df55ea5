"""``python -m benchmarks [--only NAME[,NAME]] [--tiny]``: the suite (``suite.py``)."""

import sys

from benchmarks.suite import main

sys.exit(main())
