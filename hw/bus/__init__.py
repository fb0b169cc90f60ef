"""Shared bus interfaces: AXI4 and AXI4-Lite signatures, and the register bank."""
