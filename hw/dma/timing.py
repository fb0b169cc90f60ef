"""The DMA engine's pipeline choices, as one parameter (:class:`DmaTiming`)."""

from dataclasses import dataclass

__all__ = ["DmaTiming"]


@dataclass(frozen=True)
class DmaTiming:
    """Where the DMA engine's long paths are cut and how deep its look-ahead queues are. The
    defaults are what its ECP5 builds at 100 MHz use (``make report``); a slower target (an
    iCE40, or simulation) builds with them too, and may trade some for cells. None of them
    changes what a descriptor moves; a smaller ``columns_in_flight`` costs the tile path
    cycles.

    bits_per_ready
        Flip-flops of the row path's realigner that step on one registered copy of the write
        slice's ready (:class:`~.rows.RowCopier`): fewer, more copies and shorter nets from
        each. At least 1.
    columns_in_flight
        Columns the tile path's drain may have read from the banks and not yet sent
        (:class:`~.tile.TileDrain`): a column takes about five cycles from issue to its first
        piece, so eight keep a column a cycle going. At least 3: the columns wait in a queue
        that writes into its inner FIFO only, and with room for two a column could arrive
        while the one before it still moves on to the output register.
    late_credit
        The back end's read credit (room in the read FIFO for the bursts it issues,
        :class:`~.backend.BackEnd`) counts a beat given out of the FIFO a cycle late, from a
        register: the FIFO's pop, which the halt and the read data's ready decide, is then not
        in front of the credit's adders. The credit is never more than the room, so nothing
        changes but a burst that waits for its last beat of room waits a cycle more.
    """

    bits_per_ready: int = 64
    columns_in_flight: int = 8
    late_credit: bool = True

    def check(self):
        if not isinstance(self.late_credit, bool):
            raise ValueError(f"timing.late_credit must be True or False, not "
                             f"{self.late_credit!r}")
        for name, least in (("bits_per_ready", 1), ("columns_in_flight", 3)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ValueError(f"timing.{name} must be an integer of at least {least}, not "
                                 f"{value!r}")
