"""The Python API, for notebooks and scripts: run a simulation of both parties on this
machine, or talk to a running daemon as its operator, and get what was learned as a pgmpy
model, a networkx graph or DOT text. The ``ppbn`` commands run on the same calls.

    import ppbn

    sim = ppbn.simulate(network="asia", records=5000, max_parents=2)
    model = sim.network.to_pgmpy()          # pgmpy DiscreteBayesianNetwork with its CPDs
    pram = ppbn.simulate(network="asia", records=5000, path="pram", p=0.2)  # or "perturb"

    with ppbn.Daemon("alice.example.org:7401", tls_dir="op") as alice:
        job = alice.learn(max_parents=3)
        job.wait()
        network = job.result()

    ppbn.load_result("ppbn-out/JOB")        # a job folder written earlier
    ppbn.sample("ppbn-out/JOB", 20_000, seed=1, out="synth.csv")  # synthetic records

Every module here imports the heavy libraries inside its functions, so ``import ppbn``
stays quick (the command line starts through it).
"""

from ppbn.api.daemon import Daemon, Job
from ppbn.api.result import Cpt, NetworkResult, load_result
from ppbn.api.sample import sample
from ppbn.api.simulate import Simulation, simulate
from ppbn.api.simulate_paths import PathSimulation

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
