"""Fixtures shared by the shiftlib tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture
def one_blas_thread() -> Iterator[None]:
    """The machine is 2 shared cores: keep BLAS single-threaded (multi-threaded BLAS under contention made
    small fits ~30× slower; results are unaffected). Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("one_blas_thread")``."""
    with threadpool_limits(1):
        yield
