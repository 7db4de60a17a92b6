"""The secure path as a classifier, on the data of ``ppbn compare-classifiers``.

The perturbation learners trade accuracy for privacy; the secure path (Yang and Wright)
gives the exact network of the joined data and shows each party nothing but that network.
To set them side by side on the same records, the training sample is split between
alice and bob (the class with alice, the attributes alternating), both daemons run the
``learn`` job (hill climbing, so no variable order has to be chosen) over loopback with
mutual TLS, and the learned network classifies the original test records by the class's
posterior given every attribute (``BayesNet.predict``). The plaintext reference network
is learned on the joined records in this process and must be the secure one, edge for edge.
For the cost of the perturbation path over the same daemons, the three classifiers also
run as ``perturb-learn`` jobs (setup I: alice, the class's owner, receives bob's randomized
attributes) at one randomization level; their accuracy is the comparison's own
(``classifier_compare``), since the daemons randomize with their own CSPRNGs.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.bn.learn import learn_reference
from ppbn.bn.schema import Schema
from ppbn.jobs.policy import LocalPolicy

SECURE_MAX_PARENTS = 2
SECURE_SCORE = "bic"
SECURE_TIMEOUT_S = 3600.0


def owners(columns: tuple[str, ...], class_name: str) -> dict[str, str]:
    """The class with alice, the attributes alternating bob, alice, bob, ..."""
    out = {class_name: "alice"}
    attributes = [c for c in columns if c != class_name]
    out.update({a: ("bob", "alice")[k % 2] for k, a in enumerate(attributes)})
    return out


def _write_folder(
    folder: Path,
    columns: tuple[str, ...],
    states: dict[str, tuple[str, ...]],
    class_name: str,
    codes: np.ndarray,
) -> Schema:
    from ppbn.data.party_data import write_party_csv

    owner = owners(columns, class_name)
    schema = Schema.from_dict(
        {
            "id_column": "id",
            "variables": [
                {"name": c, "owner": owner[c], "states": list(states[c])} for c in columns
            ],
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "schema.json").write_text(schema.to_json(), encoding="utf-8")
    ids = [f"r{i}" for i in range(codes.shape[0])]
    for party in ("alice", "bob"):
        own = tuple(c for c in columns if owner[c] == party)
        write_party_csv(
            folder / f"{party}.csv", schema, ids, own, codes[:, [columns.index(c) for c in own]]
        )
    return schema


def secure_classifier(
    columns: tuple[str, ...],
    states: dict[str, tuple[str, ...]],
    class_name: str,
    train: np.ndarray,
    test: np.ndarray,
    say: Callable[[str], None] = lambda _m: None,
    policy: LocalPolicy | None = None,
    key_bits: int | None = None,
    perturbation: tuple[str, float] | None = None,
) -> dict[str, Any]:
    """Learn the network on the secure path and on the joined data; measure both on ``test``.
    ``policy`` and ``key_bits`` default to the daemons' built-in policy and the learn job's
    key size (tests pass their test policy and a 1024-bit key); ``perturbation`` = ("p" or
    "theta", level) also times the perturbation learners' setup-I jobs at that level."""
    from ppbn.lab.compare import bytes_exchanged, network_from_json
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki

    tick = time.perf_counter()
    reference = learn_reference(
        list(columns), states, train, SECURE_MAX_PARENTS, SECURE_SCORE, search="hc"
    ).network
    reference_s = time.perf_counter() - tick
    truth = test[:, columns.index(class_name)]
    out: dict[str, Any] = {
        "search": "hc",
        "score": SECURE_SCORE,
        "max_parents": SECURE_MAX_PARENTS,
        "owners": owners(columns, class_name),
        "reference": {
            "accuracy": float(np.mean(reference.predict(test, class_name) == truth)),
            "edges": len(reference.edges()),
            "seconds": reference_s,
        },
    }
    with tempfile.TemporaryDirectory(prefix="ppbn-classifier-secure-") as work_dir:
        work = Path(work_dir)
        schema = _write_folder(work / "data", columns, states, class_name, train)
        make_local_pki(work / "certs")
        files = PairFiles(
            work / "data" / "schema.json",
            {"alice": work / "data" / "alice.csv", "bob": work / "data" / "bob.csv"},
            work / "certs",
            work,
        )
        say("secure path: alice and bob daemons, job kind learn (hill climbing)")
        params = {
            "max_parents": SECURE_MAX_PARENTS,
            "score": SECURE_SCORE,
            "search": "hc",
            "disclosure": "public",
            **({"key_bits": key_bits} if key_bits else {}),
        }
        with LocalPair(files, SECURE_TIMEOUT_S, policy=policy) as pair:
            tick = time.perf_counter()
            _job, outcomes = pair.run_job("alice", "learn", params)
            wall = time.perf_counter() - tick
            if perturbation is not None:
                out["perturbation_jobs"] = _perturbation_jobs(
                    pair, columns, class_name, perturbation, say
                )
        mine = outcomes["alice"]
        if mine.state != "SUCCEEDED":
            out["secure"] = {
                "available": False,
                "reason": f"job {mine.state.lower()}: {mine.error}",
            }
            return out
        document = json.loads((Path(mine.out_dir) / "network.json").read_text(encoding="utf-8"))
        network = network_from_json(document, schema)
    out["secure"] = {
        "available": True,
        "accuracy": float(np.mean(network.predict(test, class_name) == truth)),
        "edges": len(network.edges()),
        "wall_s": wall,
        "bytes_exchanged": bytes_exchanged(outcomes),
        "equal_to_reference": sorted(network.edges()) == sorted(reference.edges()),
        "largest_cpt_difference": max(
            float(np.max(np.abs(network.cpts[v] - reference.cpts[v]))) for v in columns
        )
        if sorted(network.edges()) == sorted(reference.edges())
        else None,
    }
    return out


def _perturbation_jobs(
    pair,
    columns: tuple[str, ...],
    class_name: str,
    level: tuple[str, float],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Wall time and bytes of each classifier's ``perturb-learn`` job (setup I) at ``level``."""
    from ppbn.lab.compare import bytes_exchanged

    parameter, value = level
    attributes = [c for c in columns if c != class_name]
    out: dict[str, Any] = {}
    for learner in ("nb", "id3", "perceptron"):
        params = {
            "learner": learner,
            "class": class_name,
            parameter: value,
            "randomized": attributes,
        }
        tick = time.perf_counter()
        _job, outcomes = pair.run_job("alice", "perturb-learn", params)
        mine = outcomes["alice"]
        if mine.state != "SUCCEEDED":
            out[learner] = {"available": False, "reason": f"job {mine.state.lower()}: {mine.error}"}
            continue
        out[learner] = {
            "available": True,
            "wall_s": time.perf_counter() - tick,
            "bytes_exchanged": bytes_exchanged(outcomes),
        }
        say(f"perturb-learn {learner} ({parameter} = {value:g}): {out[learner]['wall_s']:.1f} s")
    return out
