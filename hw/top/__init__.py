"""The SoC and board tops (issue 9): bus fabric, on-chip memory, the UART bridge."""
