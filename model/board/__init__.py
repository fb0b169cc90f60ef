"""Host side of the board builds: the UART bridge's framing protocol, the SoC's address map, and
the driver that loads tensors, runs the blocks and reads results (``atomcube board``)."""
