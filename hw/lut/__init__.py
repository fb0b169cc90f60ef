"""The LUT unit: NVDLA's hybrid LUT, N lanes per cycle."""
