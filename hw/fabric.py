"""What a block may ask of the FPGA it is built for, through the ``platform`` it is elaborated
with. Simulation and the blocks' own builds elaborate with no platform, and every request then
falls back to plain logic; a board top is elaborated with its family's platform
(:func:`hw.top.board.board_platform`)."""

from amaranth import Const, Instance, Signal

__all__ = ["Ecp5Globals", "global_buffer"]


class Ecp5Globals:
    """The platform a board top is elaborated with on the ECP5 (``verilog.convert(...,
    platform=Ecp5Globals())``): it offers :meth:`global_buffer`, which puts a signal of large
    fan-out (a reset) on one of the eight global networks that reach logic inputs, through a
    DCCA. Such a signal then takes no general routing to its thousands of flip-flops, and
    reaches them all with about the same delay. Blocks call it through :func:`global_buffer`,
    which leaves the signal as it is on any other platform (and in simulation)."""

    def global_buffer(self, m, signal, name):
        out = Signal(name=f"{name}_global")
        m.submodules[f"{name}_dcca"] = Instance("DCCA", i_CLKI=signal, i_CE=Const(1),
                                                o_CLKO=out)
        return out


def global_buffer(platform, m, signal, name):
    """``signal`` through the platform's global buffer if it has one, else ``signal``."""
    buffer = getattr(platform, "global_buffer", None)
    return signal if buffer is None else buffer(m, signal, name)
