"""Session-wide test settings."""

from hypothesis import settings

# CI runs on a shared 2-core machine next to vLLM CPU engines: hypothesis's default 200 ms per-example deadline
# would fail on scheduling noise, not on a slow property. Examples are still bounded by pytest's timeout.
settings.register_profile("moe-serving", deadline=None)
settings.load_profile("moe-serving")
