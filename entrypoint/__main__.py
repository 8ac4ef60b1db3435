"""`python -m entrypoint ...` (the image's ENTRYPOINT)."""

import sys

from entrypoint.cli import main

if __name__ == "__main__":
    sys.exit(main())
