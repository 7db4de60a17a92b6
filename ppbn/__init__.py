"""ppbn: learn one Bayesian network over two parties' vertically partitioned data.

The Python API (``ppbn.simulate``, ``ppbn.Daemon``, ``ppbn.load_result``, ``ppbn.sample``) is
in ppbn/api; docs/architecture.md lays out the layers beneath it.
"""

from ppbn.api import (
    Cpt,
    Daemon,
    Job,
    NetworkResult,
    PathSimulation,
    Simulation,
    load_result,
    sample,
    simulate,
)

__version__ = "0.1.0"
__all__ = [
    "Cpt",
    "Daemon",
    "Job",
    "NetworkResult",
    "PathSimulation",
    "Simulation",
    "load_result",
    "sample",
    "simulate",
]
