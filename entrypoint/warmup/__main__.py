import sys

from entrypoint.warmup.send import main

sys.exit(main())
