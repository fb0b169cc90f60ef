"""Sparse weight decompressor: NVDLA compressed weight surfaces in, dense weight atoms out."""
