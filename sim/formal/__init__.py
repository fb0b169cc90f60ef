"""Formal proofs of the blocks 'handshakes: harnesses, property helpers and the sby runner."""
