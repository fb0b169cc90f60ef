"""Shared test helpers."""

import contextlib

import pytest
from amaranth.hdl import Elaboratable


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
    reported unused whenever it is collected: every elaboratable whose constructor the refusal
    came through, and those it had built, are marked as ones that need not be used."""

    @contextlib.contextmanager
    def refused(exc, match):
        with pytest.raises(exc, match=match) as info:
            yield info
        tb = info.tb
        while tb is not None:
            _needs_no_use(tb.tb_frame.f_locals.get("self"))
            tb = tb.tb_next

    yield refused


def _needs_no_use(thing, seen=None):
    """Mark ``thing`` (if an elaboratable) and the elaboratables it holds, and theirs, as ones
    Amaranth need not warn about when they are never elaborated."""
    seen = set() if seen is None else seen
    if not isinstance(thing, Elaboratable) or id(thing) in seen:
        return
    seen.add(id(thing))
    thing._MustUse__silence = True
    for part in vars(thing).values():
        _needs_no_use(part, seen)


@pytest.fixture
def inspected():
    """``inspected(component)``: a component built only to read its attributes, never
    elaborated: no warning that it (or what it built) went unused."""
    return _needs_no_use
