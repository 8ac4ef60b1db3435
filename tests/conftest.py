"""Session-wide test settings and shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

# Triton's interpreter (no GPU) must be chosen before any test module imports a kernel (triton.jit reads
# TRITON_INTERPRET when it decorates): here, not only in the kernel suites' conftests, so that any selection of tests
# works. `pytest tests/entrypoint tests/tools` failed 23 plugin tests under the interpreter until 2026-12-05.
import tests.ops.conftest  # noqa: F401

# CI runs on a shared 2-core machine next to vLLM CPU engines: hypothesis's default 200 ms per-example deadline
# would fail on scheduling noise, not on a slow property. Examples are still bounded by pytest's timeout.
settings.register_profile("moe-serving", deadline=None)
settings.load_profile("moe-serving")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """One local moto server (S3, IAM, SageMaker + the gaps tests/moto_sagemaker.py fills) for the session.

    Point boto3 at it with AWS_ENDPOINT_URL. Tests keep to their own buckets and resource names.
    """
    from tests.moto_sagemaker import moto_server  # moto is heavy: imported only where a test needs it

    with moto_server() as url:
        yield url
