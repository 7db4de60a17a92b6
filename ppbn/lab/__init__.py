"""Experiments and local harnesses: daemons on loopback, the link shaper, the comparisons of
the secure and randomized paths, and the papers' reproductions."""
