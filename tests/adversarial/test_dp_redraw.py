"""One charge buys one draw: a party that crashes its own daemon after noisy values were
opened, then resumes the job again and again, holds a fresh draw of the noisy parent
choices with each run, and each such run is charged again at the honest daemon.

The hostile alice dumps every noisy choice her daemon opens and makes her job fail right
after the second wave of them is opened (as a SIGKILL after "checkpoint after K2 step 1"
would), then resumes from step 1: the second wave's choices are drawn again, run after run.
Without a charge per run, bob's budget showed one charge for all the draws."""

from __future__ import annotations

import math

import pytest
from known_files import TEST_POLICY
from loopback_pair import insecure_pair
from waiting import wait_until

from ppbn.api.simulate import make_data
from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.client import DaemonClient
from ppbn.protocols.channel import PeerGone
from ppbn.protocols.learning import dp

EPSILON = 1.0
CRASHES = 2


def test_each_run_that_draws_noise_is_charged_again(tmp_path, monkeypatch):
    files = make_data(tmp_path, "asia", 300, seed=11)
    data = files.schema.parent
    draws: list[list[str | None]] = []  # what alice's daemon opened, run by run
    waves: list[int] = []  # alice's live waves, run by run
    crashes = [CRASHES]
    honest = dp.NoisyOracle.best_parents

    def hostile(self, requests, tau):
        answers = honest(self, requests, tau)
        if self.scorer.role == "alice":
            waves[-1] += 1
            draws[-1].extend(answers)
            # the first run dies in its second wave, after the checkpoint of the first;
            # each resumed run dies in its first live wave: the same wave, drawn again
            if crashes[0] and (waves[-1] >= 2 or len(waves) > 1):
                crashes[0] -= 1
                raise PeerGone("alice's daemon died (hostile test)")
        return answers

    monkeypatch.setattr(dp.NoisyOracle, "best_parents", hostile)
    policy = LocalPolicy.load(TEST_POLICY)
    params = {"max_parents": 2, "key_bits": 1024, "dp_epsilon": EPSILON}
    with (
        insecure_pair(data, tmp_path, {"alice": policy, "bob": policy}) as (daemons, ports),
        DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as alice,
    ):
        job_id, states = "", []
        for run in range(CRASHES + 1):
            draws.append([])
            waves.append(0)
            job_id = alice.start("learn", {} if run else params, job_id, resume=run > 0)
            states.append(alice.wait(job_id, timeout_s=300).state)
            done = daemons["bob"].jobs[job_id].done
            wait_until(done.is_set, what="bob's run")
        assert states == ["FAILED"] * CRASHES + ["SUCCEEDED"]
        bob = daemons["bob"]
        key = bob.setup.dataset()
        runs = [r for r in bob.setup.budget.runs(key) if r.first.job_id == job_id]
    drawn = [run for run in draws if run]
    assert len(drawn) == CRASHES + 1  # every run opened noisy choices at alice
    assert all(len(run) >= 1 for run in drawn)
    # bob charged every run that drew: one charge per draw of each value
    assert [r.status.split(" ")[0] for r in runs] == ["released"] * len(drawn)
    assert bob.setup.budget.spent(key)[0] == pytest.approx(EPSILON * len(drawn))
    assert math.isclose(
        daemons["alice"].setup.budget.spent(daemons["alice"].setup.dataset())[0],
        EPSILON * len(drawn),
    )
