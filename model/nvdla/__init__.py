"""NVDLA formats and units: the hybrid LUT (:mod:`model.nvdla.lut`) and its fitting tool
(:mod:`model.nvdla.lut_fit`)."""
