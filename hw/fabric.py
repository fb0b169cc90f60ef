"""What a block may ask of the FPGA it is built for, through the ``platform`` it is elaborated
with. Simulation and iCE40 builds elaborate with no platform, and every request then falls back to
plain logic, as do the blocks' own builds by default; an ECP5 board top is elaborated with
:class:`Ecp5Globals` (:func:`hw.top.board.board_platform`), an ECP5 block alone with
:class:`Ecp5Copies` when built with ``--copies`` (:mod:`hw.synth`).

Three requests: :func:`global_buffer` (a signal of large fan-out on a global network),
:func:`register_copies` (a register in several copies that the synthesis keeps apart; and
:func:`registered_copy`, a wide value's copy made of them) and
:func:`registered_product` (a multiply with its operand and product registers inside the
multiplier block); and :func:`shared_select`, a wide multiplexer whose select comes in such copies.

One more question a block asks its platform: whether to check its look-ahead inputs
(:func:`look_ahead`). The unit tests elaborate under :class:`Checked`, which says yes; every
build for the tools says no, so no assertion reaches their Verilog.

The cells these requests instantiate on the ECP5 (``DCCA``, ``TRELLIS_FF``, ``MULT18X18D``) have
behavioural models in ``sim/models/ecp5.v``, so that a block elaborated with :class:`Ecp5Globals`
can be simulated as the board builds it (the ``-ecp5`` cases of :mod:`sim.benches`)."""

import operator

from amaranth import (
    Cat,
    ClockSignal,
    Const,
    Elaboratable,
    Fragment,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
    Value,
    signed,
)
from amaranth.hdl import Assert

__all__ = ["Checked", "Ecp5Copies", "Ecp5Globals", "check_look_ahead", "global_buffer",
           "look_ahead",
           "register_copies", "registered_copy", "registered_product", "registered_operation",
           "shared_select"]

#: the ECP5 multiplier block's operand width (MULT18X18D: 18 x 18 bits, signed or unsigned)
MULT18 = 18


class Ecp5Copies:
    """The platform an ECP5 build of a block alone is elaborated with under ``--copies``
    (:mod:`hw.synth`): it offers :meth:`register_copies`, through :func:`register_copies`:
    flip-flops as ``TRELLIS_FF`` instances, which Yosys keeps apart. It has no global buffers:
    nextpnr could not route a DCCA in a block placed out of context (docs/board.md)."""

    def register_copies(self, m, value, count, name, reset, enable=None):
        # one TRELLIS_FF each: Yosys merges flip-flops with the same input (a keep attribute on
        # their wires does not stop it), but not instances of a library cell. The reset wins
        # over the enable (LSR_OVER_CE), as in Amaranth's registers
        copies = []
        for k in range(count):
            q = Signal(name=f"{name}{k}")
            m.submodules[f"{name}{k}_ff"] = Instance(
                "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1" if enable is None else "CE",
                p_CLKMUX="CLK", p_LSRMUX="LSR",
                p_SRMODE="LSR_OVER_CE", p_REGSET="SET" if reset else "RESET",
                i_CLK=ClockSignal(), i_LSR=ResetSignal(),
                i_CE=Const(1) if enable is None else enable, i_DI=value, o_Q=q)
            copies.append(q)
        return copies

    def registered_product(self, m, a, b, enable, name, width):
        """:func:`registered_product` as one ``MULT18X18D`` with its input registers (A, B) and
        its output register on, all clocked by the domain's clock, enabled by ``enable`` (CE0)
        and cleared by its reset (RST0). The pipeline register stays off: nextpnr's timing for
        the block knows the input and output registers (its ``MULT18X18D`` timing classes) but
        not that one. Each operand goes in extended to 18 bits, with SIGNEDA/SIGNEDB set by
        its own signedness."""
        ports = {"i_CLK0": ClockSignal(), "i_CE0": enable, "i_RST0": ResetSignal(),
                 "i_SOURCEA": Const(0), "i_SOURCEB": Const(0)}
        for port, value in (("A", a), ("B", b)):
            sign = value.shape().signed
            if len(value) > MULT18:
                raise ValueError(f"registered_product {name}: operand {port} has "
                                 f"{len(value)} bits; one MULT18X18D takes 18")
            wide = Signal(signed(MULT18) if sign else MULT18, name=f"{name}_{port.lower()}18")
            m.d.comb += wide.eq(value)
            ports[f"i_SIGNED{port}"] = Const(int(sign))
            ports.update({f"i_{port}{k}": wide[k] for k in range(MULT18)})
        if width > 2 * MULT18:
            raise ValueError(f"registered_product {name}: a {width}-bit product is wider than "
                             f"the block's 36 bits")
        p = Signal(2 * MULT18, name=f"{name}_p36")
        ports.update({f"o_P{k}": p[k] for k in range(2 * MULT18)})
        m.submodules[f"{name}_mult"] = Instance(
            "MULT18X18D", p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0",
            p_REG_OUTPUT_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTB_CE="CE0",
            p_REG_OUTPUT_CE="CE0", p_REG_INPUTA_RST="RST0", p_REG_INPUTB_RST="RST0",
            p_REG_OUTPUT_RST="RST0", p_REG_PIPELINE_CLK="NONE", p_GSR="DISABLED",
            p_RESETMODE="SYNC", **ports)
        product = Signal(signed(width), name=name)
        m.d.comb += product.eq(p[:width].as_signed())
        return product


class Ecp5Globals(Ecp5Copies):
    """The platform a board top is elaborated with on the ECP5 (``verilog.convert(...,
    platform=Ecp5Globals())``): besides the copies of :class:`Ecp5Copies` it offers
    :meth:`global_buffer`, which puts a signal of large fan-out (a reset) on one of the eight
    global networks that reach logic inputs, through a DCCA. Such a signal then takes no general
    routing to its thousands of flip-flops, and reaches them all with about the same delay.
    Blocks call it through :func:`global_buffer`, which leaves the signal as it is on any other
    platform (and in simulation)."""

    def global_buffer(self, m, signal, name):
        out = Signal(name=f"{name}_global")
        m.submodules[f"{name}_dcca"] = Instance("DCCA", i_CLKI=signal, i_CE=Const(1),
                                                o_CLKO=out)
        return out


def global_buffer(platform, m, signal, name):
    """``signal`` through the platform's global buffer if it has one, else ``signal``."""
    buffer = getattr(platform, "global_buffer", None)
    return signal if buffer is None else buffer(m, signal, name)


def register_copies(platform, m: Module, value, count: int, name: str, reset: int = 0,
                    enable=None):
    """``count`` registers that each hold ``value`` (one bit) as it was a cycle before (``reset``
    after a reset): copies of one flip-flop, for an enable that would otherwise spread from
    one register to hundreds of flip-flops across the die. Each copy drives a share of them,
    and the placer can put it beside them. On a platform that offers it (the ECP5 board tops,
    a block built with ``--copies``) the copies stay apart in the netlist; elsewhere
    (simulation, the blocks' own builds) they are one register, as Yosys would merge them
    anyway. With ``enable`` they load only in the cycles it is high (a reset still clears
    them)."""
    copy = getattr(platform, "register_copies", None)
    if copy is not None:
        return copy(m, value, count, name, reset, enable)
    q = Signal(name=name, init=reset)
    with m.If(1 if enable is None else enable):
        m.d.sync += q.eq(value)
    return [q] * count


def registered_copy(platform, m: Module, value, name: str, enable=None):
    """``value`` (any width) as it was a cycle before (or, with ``enable``, in the last cycle
    ``enable`` was high), in registers of its own: a copy, for one group of its users, of a
    value that many read all over a block (a job's configuration), which the placer can put
    beside that group. On a platform with copies each bit is a :func:`register_copies`
    register (``<name><bit>_c0``) that the synthesis keeps apart from other registers of the
    same value; elsewhere Yosys may merge them."""
    value = Cat(value)
    return Cat(*(register_copies(platform, m, value[b], 1, f"{name}{b}_c", enable=enable)[0]
                 for b in range(len(value))))


def registered_product(platform, m: Module, a, b, enable, name: str, width: int):
    """``a * b`` two cycles later, as a signed value of ``width`` bits: the operands are
    registered, then their product, the registers held while ``enable`` is low and cleared by
    the domain's reset. On a platform that offers it (the ECP5 board tops, a block built with
    ``--copies``) the three registers are those of one multiplier block, so that nothing but
    the block's own delay lies between them; ``a`` and ``b`` must then fit the block (18 bits
    each, signed or unsigned). Elsewhere (simulation, the blocks' own builds) they are
    flip-flops either side of a multiplier the tools infer."""
    product = getattr(platform, "registered_product", None)
    if product is not None:
        return product(m, a, b, enable, name, width)
    return registered_operation(m, a, b, enable, name, width, operator.mul)


def registered_operation(m: Module, a, b, enable, name: str, width: int, operation):
    """``operation(a, b)`` in :func:`registered_product`'s registers, in flip-flops: the
    operands registered, then the result, held while ``enable`` is low."""
    ra = Signal(a.shape(), name=f"{name}_a")
    rb = Signal(b.shape(), name=f"{name}_b")
    p = Signal(signed(width), name=name)
    with m.If(enable):
        m.d.sync += [ra.eq(a), rb.eq(b), p.eq(operation(ra, rb))]
    return p


def shares(width: int, copies):
    """The bits each of ``copies`` (copies of one control bit) looks after in a ``width``-bit
    value: pairs (copy, slice), copy k taking the k-th of ``len(copies)`` equal shares (the
    last may be shorter, and a surplus copy takes none)."""
    step = -(-width // len(copies))
    starts = range(0, width, step)
    return [(c, slice(lo, lo + step)) for c, lo in zip(copies[:len(starts)], starts, strict=True)]


def shared_select(selects, when_set, when_clear):
    """``Mux(select, when_set, when_clear)`` for wide values, with ``selects`` copies of the
    select (from :func:`register_copies`), each choosing for its share of the bits
    (:func:`shares`), so that no one net reaches every multiplexer."""
    return Cat(*(Mux(s, when_set[part], when_clear[part])
                 for s, part in shares(len(when_set), selects)))


class Checked(Elaboratable):
    """``design`` elaborated with its look-ahead checks (:func:`look_ahead`): the platform every
    part of it sees is this object, whose ``checks`` is true and which offers none of the
    requests above, so the design is otherwise the one simulation elaborates with no
    platform. For the Amaranth simulator: ``Simulator(Checked(dut))``."""

    checks = True

    def __init__(self, design):
        self.design = design

    def elaborate(self, platform):
        return Fragment.get(self.design, self)


def look_ahead(platform, m: Module, name: str, ahead, value, *, when=1):
    """``ahead``, a look-ahead a component takes from a neighbour: what ``value`` (the
    signal it stands for, usually a handshake) will be in the next cycle. Returns ``ahead``,
    for the registers the component works out from it a cycle early.

    On a platform that asks for checks (:class:`Checked`) it also adds the check that the
    neighbour keeps its word (:func:`check_look_ahead`): a broken promise stops the
    simulation with an ``AssertionError`` naming ``name``. Elsewhere it adds nothing."""
    if getattr(platform, "checks", False):
        check_look_ahead(m, name, ahead, value, when=when)
    return ahead


def check_look_ahead(m: Module, name: str, ahead, value, *, when=1, unless=None,
                     src_loc_at=0):
    """The assertion that ``value`` equals ``ahead`` as it was a cycle before, in every cycle
    ``when`` holds, except in the first cycle after a reset of ``m``'s domain or after a cycle
    in which ``unless`` held (either may break a promise made before it). Checked at the clock
    edge, on the cycle's settled values (a testbench sets its inputs some time after the edge
    that updated the past value). ``src_loc_at`` as for Amaranth's ``Assert``."""
    was = Signal.like(ahead, name=f"{name}_ahead_was")
    fresh = Signal(init=1, name=f"{name}_ahead_fresh")
    m.d.sync += [was.eq(ahead), fresh.eq(0 if unless is None else unless),
                 Assert(fresh | ~Value.cast(when).bool() | (value == was),
                        f"{name}: the look-ahead of the cycle before is not kept",
                        src_loc_at=src_loc_at)]
