"""The Python API end to end: a simulation returns a pgmpy model equal to the reference's,
the PRAM and perturbation modes report every daemon and the reference learned in the
clear, and an operator's Daemon starts, follows, cancels and reads jobs of running daemons."""

from __future__ import annotations

import numpy as np
import pytest
from timeouts import PEER_TIMEOUT_S, WAIT_S

import ppbn
from ppbn.api.simulate import make_data
from ppbn.api.simulate_paths import PathSimulation
from ppbn.errors import UserError
from ppbn.pair.loopback import LocalPair, PairFiles
from ppbn.parties.pki import make_local_pki

pytestmark = pytest.mark.slow


def test_simulate_returns_models_equal_to_the_reference(tmp_path):
    sim = ppbn.simulate(network="asia", records=400, max_parents=2, score="exact")
    assert sim.succeeded and sim.matches_reference
    model, reference = sim.network.to_pgmpy(), sim.reference.to_pgmpy()
    assert sorted(model.edges()) == sorted(reference.edges())
    for cpd in reference.get_cpds():
        ours = model.get_cpds(cpd.variable)
        assert ours.variables == cpd.variables
        assert np.allclose(ours.values, cpd.values, atol=1e-9)
    # both parties learned the same structure; each kept its ledger and its figures
    assert sim.networks["bob"].edges == sim.network.edges
    assert {e["kind"] for e in sim.network.ledger} >= {"record_count", "k2_decision"}
    assert sim.network.stats["bytes_sent"] > 0
    assert sim.network.owners["asia"] == "alice"
    assert sim.folder is None and set(sim.timings) >= {"data_s", "job_s"}
    # the network the records were sampled from, and the learned one drawn against it
    assert len(sim.truth.edges) == 8
    marks = sim.network.plot(tmp_path / "asia.png", sim.truth)
    assert len(marks["same"]) + len(marks["missing"]) + len(marks["reversed"]) == 8
    assert (tmp_path / "asia.png").stat().st_size > 10_000


def test_simulate_refuses_what_it_cannot_run_before_any_work(tmp_path):
    with pytest.raises(UserError, match="give network and records"):
        ppbn.simulate(records=10)
    with pytest.raises(UserError, match="need align='psi'"):
        ppbn.simulate(network="asia", records=10, overlap=0.5)


def test_simulate_runs_the_pram_path(tmp_path):
    sim = ppbn.simulate(
        network="asia", records=300, path="pram", p=0.3, max_parents=1, out=tmp_path / "run"
    )
    assert isinstance(sim, PathSimulation) and sim.succeeded, sim.report
    report = sim.report
    assert (report["path"], report["setup"], report["kind"]) == ("pram", 1, "pram")
    assert set(report["parties"]) == {"alice", "bob"} == set(sim.outcomes)
    # the K2 order the job ran under, filled in from the schema
    assert report["params"]["order"][:2] == ["asia", "smoke"]
    assert report["structure_vs_reference"]["shd"] >= 0 and report["reference_edges"] >= 1
    assert report["privacy"] and report["edges"] == sim.outcomes["alice"].result["edges"]
    # the daemons' files are where ``out`` put them, and the outcomes say so
    assert sim.folder == tmp_path / "run"
    assert all(o.out_dir.startswith(str(tmp_path / "run")) for o in sim.outcomes.values())


def test_simulate_runs_a_perturbation_learner_with_a_miner():
    params = {"learner": "nb", "class": "dysp", "theta": 0.8}
    sim = ppbn.simulate(network="asia", records=300, path="perturb", setup=2, params=params)
    assert isinstance(sim, PathSimulation) and sim.succeeded, sim.report
    report = sim.report
    assert (report["setup"], report["kind"]) == (2, "perturb-learn-miner")
    assert set(report["parties"]) == {"alice", "bob", "miner"}
    assert report["params"] == params
    assert set(report["reference_model"]) == {"prior"}  # naive Bayes' summary
    assert report["parties"]["miner"]["result"]["model"]["prior"]


def test_an_operator_starts_follows_and_cancels_jobs(tmp_path):
    files = make_data(tmp_path, "asia", 300, seed=3)
    make_local_pki(tmp_path / "certs")
    pair_files = PairFiles(files.schema, files.csvs(), tmp_path / "certs", tmp_path)
    notes = []
    with (
        LocalPair(pair_files, PEER_TIMEOUT_S) as pair,
        ppbn.Daemon(pair.address("alice"), tls_dir=tmp_path / "certs" / "alice") as alice,
    ):
        assert alice.role == "alice"
        job = alice.learn(max_parents=1, score="bic")
        outcome = job.wait(timeout_s=WAIT_S, progress=notes.append)
        assert outcome.state == "SUCCEEDED", outcome.error
        network = job.result()
        assert network.cpts and not network.withheld  # the files are on this host
        assert [list(e) for e in network.edges] == outcome.result["edges"]
        assert alice.job(job.job_id).status().state == "SUCCEEDED"

        slow = alice.learn(max_parents=2, score="exact")
        assert slow.cancel().job_id == slow.job_id
        assert slow.wait(timeout_s=WAIT_S).state == "CANCELLED"
        with pytest.raises(UserError, match="has no result \\(CANCELLED\\)"):
            slow.result()
        with pytest.raises(UserError, match="knows no job 'no-such-job'"):
            alice.job("no-such-job").status()
    assert notes  # progress was reported while the job ran
