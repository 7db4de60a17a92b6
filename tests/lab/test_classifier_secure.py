"""The secure path as a classifier next to the perturbation learners (compare-classifiers
--secure): BayesNet.predict against the posterior by enumeration, and the two daemons'
network equal to the reference network on a small sample."""

import itertools

import numpy as np
from known_files import TEST_POLICY

from ppbn.bn.model import BayesNet
from ppbn.jobs.policy import LocalPolicy
from ppbn.lab.classifier_compare import ClassifierSettings, make_problem
from ppbn.lab.classifier_secure import secure_classifier


def _tiny_net() -> BayesNet:
    rng = np.random.default_rng(2)
    states = {"a": ("0", "1", "2"), "c": ("0", "1"), "b": ("0", "1")}
    parents = {"a": (), "c": ("a",), "b": ("a", "c")}

    def cpt(rows, k):
        table = rng.random((rows, k)) + 0.05
        return table / table.sum(axis=1, keepdims=True)

    return BayesNet(
        ("a", "c", "b"), states, parents, {"a": cpt(1, 3), "c": cpt(3, 2), "b": cpt(6, 2)}
    )


def test_predict_is_the_posterior_argmax():
    net = _tiny_net()
    records = np.array(list(itertools.product(range(3), range(2), range(2))))
    got = net.predict(records, "c")
    for record, label in zip(records, got, strict=True):
        joint = []
        for c in range(2):
            a, _, b = record
            joint.append(net.cpts["a"][0, a] * net.cpts["c"][a, c] * net.cpts["b"][a * 2 + c, b])
        assert label == int(np.argmax(joint))


def test_secure_network_classifies_like_the_reference():
    settings = ClassifierSettings(
        network="asia",
        class_name="dysp",
        records=500,
        test_records=300,
        levels=(0.2,),
        attributes=("bronc", "either", "smoke"),
    )
    problem = make_problem(settings)
    out = secure_classifier(
        problem.columns,
        problem.states,
        problem.class_name,
        problem.train,
        problem.test,
        policy=LocalPolicy.load(TEST_POLICY),
        key_bits=1024,
        perturbation=("p", 0.2),
    )
    secure = out["secure"]
    assert secure["available"] and secure["equal_to_reference"]
    assert secure["largest_cpt_difference"] < 1e-9
    assert secure["accuracy"] == out["reference"]["accuracy"]
    assert secure["bytes_exchanged"] > 0
    jobs = out["perturbation_jobs"]
    assert all(
        jobs[k]["available"] and jobs[k]["bytes_exchanged"] > 0 for k in ("nb", "id3", "perceptron")
    )
    assert out["owners"]["dysp"] == "alice" and set(out["owners"].values()) == {"alice", "bob"}
