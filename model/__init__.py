"""atomcube's golden model and software: pure Python and numpy, no HDL imports."""
