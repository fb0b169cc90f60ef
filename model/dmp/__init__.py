"""DMP dv-sdk network and convolution block I/O layouts (seed 004)."""
