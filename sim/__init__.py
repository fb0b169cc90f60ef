"""cocotb benches, the runner that builds them, and the regression driver
(``python -m atomcube.sim``)."""
