"""Sophgo TPU local memory formats (the OKKernel local memory document)."""
