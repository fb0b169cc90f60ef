"""What a block may ask of the FPGA it is built for, through the ``platform`` it is elaborated
with. Simulation and iCE40 builds elaborate with no platform, and every request then falls back to
plain logic, as do the blocks' own builds by default; an ECP5 board top is elaborated with
:class:`Ecp5Globals` (:func:`hw.top.board.board_platform`), an ECP5 block alone with
:class:`Ecp5Copies` when built with ``--copies`` (:mod:`hw.synth`).

Two requests: :func:`global_buffer` (a signal of large fan-out on a global network) and
:func:`register_copies` (a register in several copies that the synthesis keeps apart), and
:func:`shared_select`, a wide multiplexer whose select comes in such copies."""

from amaranth import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal

__all__ = ["Ecp5Copies", "Ecp5Globals", "global_buffer", "register_copies", "shared_select"]


class Ecp5Copies:
    """The platform an ECP5 build of a block alone is elaborated with under ``--copies``
    (:mod:`hw.synth`): it offers :meth:`register_copies`, through :func:`register_copies`:
    flip-flops as ``TRELLIS_FF`` instances, which Yosys keeps apart. It has no global buffers:
    nextpnr could not route a DCCA in a block placed out of context (docs/board.md)."""

    def register_copies(self, m, value, count, name, reset):
        # one TRELLIS_FF each: Yosys merges flip-flops with the same input (a keep attribute on
        # their wires does not stop it), but not instances of a library cell
        copies = []
        for k in range(count):
            q = Signal(name=f"{name}{k}")
            m.submodules[f"{name}{k}_ff"] = Instance(
                "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
                p_SRMODE="LSR_OVER_CE", p_REGSET="SET" if reset else "RESET",
                i_CLK=ClockSignal(), i_LSR=ResetSignal(), i_CE=Const(1), i_DI=value, o_Q=q)
            copies.append(q)
        return copies


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


def register_copies(platform, m: Module, value, count: int, name: str, reset: int = 0):
    """``count`` registers that each hold ``value`` (one bit) as it was a cycle before (``reset``
    after a reset): copies of one flip-flop, for an enable that would otherwise spread from
    one register to hundreds of flip-flops across the die. Each copy drives a share of them,
    and the placer can put it beside them. On a platform that offers it (the ECP5 board tops,
    a block built with ``--copies``) the copies stay apart in the netlist; elsewhere
    (simulation, the blocks' own builds) they are one register, as Yosys would merge them
    anyway."""
    copy = getattr(platform, "register_copies", None)
    if copy is not None:
        return copy(m, value, count, name, reset)
    q = Signal(name=name, init=reset)
    m.d.sync += q.eq(value)
    return [q] * count


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
