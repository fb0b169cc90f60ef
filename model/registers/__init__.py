"""Every block's register map, by name. ``atomcube regs`` writes their C headers and Markdown maps
(``docs/registers/``) from here; a block adds its map to :data:`MAPS`."""

from .dma import DMA
from .lut import LUT_CDP, LUT_SDP
from .selftest import SELFTEST
from .soc import LUT_PORT, SYSCTL
from .sparse import SPARSE

MAPS = {m.name: m for m in (SELFTEST, LUT_SDP, LUT_CDP, SPARSE, DMA, SYSCTL, LUT_PORT)}

__all__ = ["MAPS", "SELFTEST", "LUT_SDP", "LUT_CDP", "SPARSE", "DMA", "SYSCTL", "LUT_PORT"]
