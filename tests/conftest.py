"""Shared test helpers."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable


def pytest_collection_modifyitems(items):
    """The tests marked ``heavy`` (simulations, FPGA builds) first, in their own order, then the
    rest. `make test` runs two workers under pytest-xdist's worksteal, which gives each one a
    contiguous half of this list and lets an idle one take half of the other's queue: with the
    long runs at the front, both workers finish on short tests instead of one waiting minutes
    for the other's last simulation."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


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
