"""Whole networks as NVDLA memory: ONNX in (``graph``), quantised and pruned (``quant``), laid
out, compressed where it pays and planned (``flow``), with a report (``report``).
``atomcube net MODEL.onnx`` runs it from the shell (docs/net.md)."""
