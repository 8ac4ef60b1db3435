"""The tune's command-line defaults, apart from the tune itself: the parser of every subcommand (serve's too) reads
them, and entrypoint.caches.tune_layer's imports would add ~10 ms to every start."""

DEFAULT_BUDGET_S = 600.0  # issue 32: the whole tune within 10 minutes on one H200
MODES = ("auto", "on", "off")
