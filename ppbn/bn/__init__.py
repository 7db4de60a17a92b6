"""Plaintext Bayesian networks: model, scores, the one K2 driver, parameters, BIF/JSON io. Pure: no I/O beyond explicit file helpers, no networking."""
