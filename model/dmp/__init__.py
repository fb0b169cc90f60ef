"""DMP dv-sdk network and convolution block I/O layouts (dv-sdk's network input/output layout
document)."""
