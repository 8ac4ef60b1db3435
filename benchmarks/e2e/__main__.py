"""``python -m benchmarks.e2e`` entry point."""

import sys

from benchmarks.e2e.cli import main

sys.exit(main())
