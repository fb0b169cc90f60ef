"""NVDLA hardware configurations: the parameters that change the memory formats.

NVDLA is built in several configurations. Each fixes the MAC array's atomic sizes, the memory
atom and which features exist; the data format guide describes the largest, nv_full. The
formats scale with three numbers:

- **memory atom** (MEMORY_ATOMIC_SIZE, bytes): feature data atoms, the alignment of feature data
  and auxiliary data strides and addresses;
- **atomic C** (MAC_ATOMIC_C_SIZE, elements): the channels of one weight chunk (the guide's
  1x1x64-element small cube), whatever the precision;
- **atomic K** (MAC_ATOMIC_K_SIZE): kernels per weight group for int8, half as many for int16
  and fp16; the same count is the auxiliary data's ElementPerAtom.

The dense weight surface is padded to one full chunk of the widest precision the configuration
has (atomic C x 2 bytes where int16/fp16 exist, x 1 otherwise): 128 bytes on nv_full, 8 on
nv_small; this is the size NVDLA's compiler rounds weights to. Pixel input keeps the guide's
32-byte line granule in every configuration (PIXEL_X_OFFSET has five bits in all of them).

    cfg = config("nv_small")
    cfg.kernels_per_group("int8")      # 8
    cfg.require("compression")         # ConfigError: nv_small has no weight compression ...

The presets follow the spec files NVDLA's hardware repository builds from (``spec/defs``); a
custom :class:`NvdlaConfig` may be made for other builds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import FormatError

#: precision name -> bytes per element (the weights module holds the dtypes)
_ELEMENT_BYTES = {"int8": 1, "int16": 2, "fp16": 2}

#: the optional features a configuration may leave out, with the wording errors use
FEATURES = {
    "compression": "weight compression (WEIGHT_COMPRESSION_DISABLE)",
    "winograd": "Winograd convolution (WINOGRAD_DISABLE)",
    "batch": "batch mode (BATCH_DISABLE)",
    "sdp_lut": "an SDP lookup table (SDP_LUT_DISABLE)",
    "sdp_eltwise": "SDP element-wise operands (SDP_EW_DISABLE)",
}


class ConfigError(FormatError):
    """A format or feature the chosen NVDLA configuration does not have."""


@dataclass(frozen=True)
class NvdlaConfig:
    """One NVDLA build's format parameters.

    name          the configuration's name (a preset's, or one of the user's choosing).
    atomic_c      MAC_ATOMIC_C_SIZE: channels per weight chunk.
    atomic_k      MAC_ATOMIC_K_SIZE: kernels per int8 weight group.
    memory_atom   MEMORY_ATOMIC_SIZE: bytes per feature data atom.
    precisions    the feature and weight element types it computes in.
    memif_bits    PRIMARY_MEMIF_WIDTH: the memory interface's data width.
    address_bits  MEM_ADDRESS_WIDTH.
    compression, winograd, batch, sdp_lut, sdp_eltwise: whether the feature exists.
    """

    name: str
    atomic_c: int
    atomic_k: int
    memory_atom: int
    precisions: tuple = ("int8",)
    memif_bits: int = 64
    address_bits: int = 32
    compression: bool = False
    winograd: bool = False
    batch: bool = False
    sdp_lut: bool = False
    sdp_eltwise: bool = False

    def __post_init__(self):
        object.__setattr__(self, "precisions", tuple(self.precisions))
        for field in ("atomic_c", "atomic_k", "memory_atom", "memif_bits"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ConfigError(field, f"must be a power of two, not {v!r}")
        if self.atomic_k < 2:
            raise ConfigError("atomic_k", "must be at least 2 (int16 groups hold half as many "
                                          "kernels)")
        if not self.precisions or set(self.precisions) - set(_ELEMENT_BYTES):
            raise ConfigError("precisions", f"must be some of {', '.join(_ELEMENT_BYTES)}, not "
                                            f"{self.precisions}")
        if self.address_bits not in (32, 64):
            raise ConfigError("address_bits", f"must be 32 or 64, not {self.address_bits}")

    # geometry ---------------------------------------------------------------------------------

    def kernels_per_group(self, precision: str) -> int:
        """Kernels per weight group: atomic K for int8, half of it for int16 and fp16."""
        return self.atomic_k if _ELEMENT_BYTES[precision] == 1 else self.atomic_k // 2

    def channels_per_atom(self, precision: str) -> int:
        """Feature data channels in one memory atom."""
        return self.memory_atom // _ELEMENT_BYTES[precision]

    @property
    def weight_align(self) -> int:
        """Bytes the dense weight surface is padded to: one chunk of the widest precision."""
        return self.atomic_c * max(_ELEMENT_BYTES[p] for p in self.precisions)

    # what it lacks ----------------------------------------------------------------------------

    def require(self, feature: str, field: str | None = None):
        """Raise :class:`ConfigError` (naming ``field``, default ``config``) unless the
        configuration has ``feature``, one of :data:`FEATURES`."""
        if not getattr(self, feature):
            raise ConfigError(field or "config", f"{self.name} has no {FEATURES[feature]}")

    def check_precision(self, precision: str, field: str = "precision"):
        """Raise :class:`ConfigError` unless the configuration computes in ``precision``."""
        if precision not in self.precisions:
            raise ConfigError(field, f"{self.name} computes in {', '.join(self.precisions)} "
                                     f"only, not {precision}")

    # serialisation ----------------------------------------------------------------------------

    def to_json(self) -> str | dict:
        """The preset's name, or every parameter of a custom configuration."""
        if CONFIGS.get(self.name) == self:
            return self.name
        return asdict(self)

    def describe(self) -> dict:
        """Every parameter and the geometry derived from it, for reports and ``--json``."""
        d = asdict(self)
        d["precisions"] = list(self.precisions)
        d["kernels_per_group"] = {p: self.kernels_per_group(p) for p in self.precisions}
        d["channels_per_atom"] = {p: self.channels_per_atom(p) for p in self.precisions}
        d["weight_align"] = self.weight_align
        return d


#: the configurations NVDLA's hardware repository defines (nv_full on its nvdlav1 branch)
CONFIGS = {c.name: c for c in (
    NvdlaConfig("nv_small", atomic_c=8, atomic_k=8, memory_atom=8),
    NvdlaConfig("nv_small_256", atomic_c=32, atomic_k=8, memory_atom=8),
    NvdlaConfig("nv_medium_512", atomic_c=32, atomic_k=16, memory_atom=16, memif_bits=128,
                address_bits=64),
    NvdlaConfig("nv_large", atomic_c=64, atomic_k=32, memory_atom=32, memif_bits=256,
                address_bits=64, sdp_lut=True, sdp_eltwise=True),
    NvdlaConfig("nv_full", atomic_c=64, atomic_k=32, memory_atom=32,
                precisions=("int8", "int16", "fp16"), memif_bits=512, address_bits=64,
                compression=True, winograd=True, batch=True, sdp_lut=True, sdp_eltwise=True),
)}
DEFAULT = "nv_full"


def config(which: NvdlaConfig | str | dict | None = None) -> NvdlaConfig:
    """A configuration from a preset's name, a custom configuration's parameters (as
    :meth:`NvdlaConfig.to_json` writes them), or itself; None is the default, nv_full."""
    if which is None:
        return CONFIGS[DEFAULT]
    if isinstance(which, NvdlaConfig):
        return which
    if isinstance(which, dict):
        try:
            return NvdlaConfig(**which)
        except TypeError as e:
            raise ConfigError("config", f"not a configuration's parameters: {e}") from None
    if which not in CONFIGS:
        raise ConfigError("config", f"must be one of {', '.join(CONFIGS)}, not {which!r}")
    return CONFIGS[which]
