"""Differential privacy of what a learning job releases: the noise, drawn as independent
bits (``noise``), the privacy plan of one job (``accounting``), and the same mechanism run
by one trusted curator in the clear (``reference``), docs/security-dp.md."""
