"""Sophgo TPU local memory formats (seed 002)."""
