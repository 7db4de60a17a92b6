"""Boolean circuits: IR, Bristol Fashion io, builders, garbling, plaintext evaluation. No I/O, no networking."""
