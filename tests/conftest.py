"""Shared test helpers."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable


@pytest.fixture
def rejected():
    """``with rejected(ValueError, "message"):`` around a component constructor that must refuse
    its arguments. Amaranth tracks a component from ``__new__``, so the half-built one would be
    reported unused when it is finally collected, in whichever test runs next; the fixture
    collects it at teardown, with that one warning silenced."""
    yield lambda exc, match: pytest.raises(exc, match=match)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        gc.collect()
