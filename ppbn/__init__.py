"""ppbn: learn one Bayesian network over two parties' vertically partitioned data.

Layers (dependencies point one way): ``parties`` -> ``protocols`` -> ``circuits`` / ``bn``.
"""

__version__ = "0.1.0"
