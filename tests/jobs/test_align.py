"""Record alignment by private set intersection: `--align psi`.

Two daemon processes whose CSVs share part of their record ids, in different row orders,
learn exactly what the reference learns on the joined intersection; each party's ledger
lists what the PSI revealed, and no file of a party names a record id only the other
holds. A daemon refuses a peer with another --align, an empty intersection, and an
intersection below its own policy's minimum of records.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from known_files import TEST_POLICY
from timeouts import PEER_TIMEOUT_S
from waiting import wait_until

from ppbn.bn.learn import learn_reference
from ppbn.bn.schema import Schema
from ppbn.cli import main as ppbn_main
from ppbn.data.datasets import make_dataset
from ppbn.data.party_data import load_joined, load_party_data
from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import LocalPair, PairFiles, free_port
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.pki import make_local_pki
from ppbn.parties.tls import PARTY_ROLES

PARAMS = {"max_parents": 2, "score": "exact", "key_bits": 1024}


def _ids(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return [row["record_id"] for row in csv.DictReader(fh)]


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("align") / "asia"
    make_dataset("asia", 500, 11, out, overlap=0.6)
    return out


def test_datasets_make_overlap_gives_each_party_own_records_in_its_own_order(overlapping):
    alice, bob = _ids(overlapping / "alice.csv"), _ids(overlapping / "bob.csv")
    assert len(alice) == len(bob) == 500
    assert len(set(alice) & set(bob)) == 300
    shared = [i for i in alice if i in set(bob)]
    assert shared != [i for i in bob if i in set(alice)]  # the rows are in different orders
    code = ppbn_main(
        [
            "datasets",
            "make",
            "--network",
            "asia",
            "--records",
            "10",
            "--overlap",
            "1.5",
            "--out",
            str(overlapping.parent / "bad"),
        ]
    )
    assert code == 2


def test_reference_align_psi_joins_the_intersection(overlapping, capsys):
    schema = Schema.load(str(overlapping / "schema.json"))
    names, codes = load_joined(
        schema, overlapping / "alice.csv", overlapping / "bob.csv", intersect=True
    )
    assert codes.shape == (300, len(names))
    assert ppbn_main(["reference", "--data", str(overlapping), "--max-parents", "2"]) == 2
    assert "has no row in" in capsys.readouterr().err


def _pair(data: Path, work: Path, policy: LocalPolicy | None = None) -> LocalPair:
    make_local_pki(work / "certs", PARTY_ROLES)
    files = PairFiles(
        data / "schema.json", {r: data / f"{r}.csv" for r in PARTY_ROLES}, work / "certs", work
    )
    return LocalPair(
        files, PEER_TIMEOUT_S, policy=policy or LocalPolicy.load(TEST_POLICY), align="psi"
    )


def test_two_daemons_learn_the_reference_of_the_intersection(overlapping, tmp_path):
    with _pair(overlapping, tmp_path) as pair, pair.client("alice") as client:
        job_id = client.start("learn", PARAMS)
        outcome = client.wait(job_id, 300)
        assert outcome.state == "SUCCEEDED", outcome.error
    schema = Schema.load(str(overlapping / "schema.json"))
    names, codes = load_joined(
        schema, overlapping / "alice.csv", overlapping / "bob.csv", intersect=True
    )
    states = {v.name: v.states for v in schema.variables}
    reference = learn_reference(names, states, codes, 2, "exact")
    only = {
        "alice": set(_ids(overlapping / "alice.csv")) - set(_ids(overlapping / "bob.csv")),
        "bob": set(_ids(overlapping / "bob.csv")) - set(_ids(overlapping / "alice.csv")),
    }
    for role in PARTY_ROLES:
        folder = pair.out_dir(role) / job_id
        learned = json.loads((folder / "network.json").read_text())
        assert learned["edges"] == [list(e) for e in reference.search.edges]
        for v in names:
            table = np.array(learned["parameters"][v]["table"])
            assert np.max(np.abs(table - reference.network.cpts[v])) < 1e-9
        ledger = {
            e["kind"]: e["value"]
            for e in json.loads((folder / "ledger.json").read_text())["entries"]
        }
        assert ledger["psi_peer_set_size"] == 500
        assert ledger["psi_intersection_size"] == ledger["aligned_record_count"] == 300
        peer_only = only["bob" if role == "alice" else "alice"]
        text = "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
        text += pair.logs[role].read_text()
        assert not [i for i in peer_only if i in text], (
            f"{role}'s files name a record only its peer holds"
        )


def _disjoint(data: Path, out: Path, keep_shared: int) -> Path:
    """A copy of ``data`` where bob's ids are renamed except for ``keep_shared`` of the shared ones."""
    out.mkdir()
    for name in ("schema.json", "alice.csv"):
        (out / name).write_bytes((data / name).read_bytes())
    alice = set(_ids(data / "alice.csv"))
    kept = 0
    lines = (data / "bob.csv").read_text().splitlines()
    rows = [lines[0]]
    for line in lines[1:]:
        record_id, rest = line.split(",", 1)
        if record_id in alice and kept < keep_shared:
            kept += 1
        else:
            record_id = "x" + record_id
        rows.append(f"{record_id},{rest}")
    (out / "bob.csv").write_text("\n".join(rows) + "\n")
    return out


@pytest.mark.parametrize(
    ("shared", "message"),
    [
        (0, "share none: nothing to learn"),
        (
            50,
            "the intersection holds 50 records, fewer than this party's policy minimum of 100: on so few "
            "records the CPTs would reveal individual records",
        ),
    ],
)
def test_small_or_empty_intersections_are_refused(overlapping, tmp_path, capsys, shared, message):
    data = _disjoint(overlapping, tmp_path / "data", shared)
    policy = dataclasses.replace(LocalPolicy.load(TEST_POLICY), min_records=100)
    with _pair(data, tmp_path, policy=policy) as pair:
        code = ppbn_main(
            [
                "learn",
                "--peer",
                pair.address("alice"),
                "--tls-dir",
                str(tmp_path / "certs" / "alice"),
                "--params",
                json.dumps(PARAMS),
                "--format",
                "json",
            ]
        )
        assert code == 2  # refused for its input, like any other bad input
        outcome = json.loads(capsys.readouterr().out)
        assert outcome["state"] == "FAILED" and message in outcome["error"]
        wait_until(
            lambda: message in pair.logs["bob"].read_text(), what="bob's own check to say the same"
        )
        assert not list(pair.out_dir("alice").rglob("network.json"))


def test_align_on_one_daemon_only_is_refused_on_both_sides(overlapping, tmp_path):
    """Each side's handshake names the flag and both settings (in-process daemons)."""
    make_local_pki(tmp_path / "certs", PARTY_ROLES)
    ports = {role: free_port() for role in PARTY_ROLES}
    aligns = {"alice": "psi", "bob": "strict"}
    daemons = []
    try:
        for role in PARTY_ROLES:
            peer = "bob" if role == "alice" else "alice"
            config = DaemonConfig(
                role=role,
                schema_path=str(overlapping / "schema.json"),
                data_path=str(overlapping / f"{role}.csv"),
                listen=f"127.0.0.1:{ports[role]}",
                peer=f"127.0.0.1:{ports[peer]}",
                tls_dir=str(tmp_path / "certs" / role),
                out_dir=str(tmp_path / f"out-{role}"),
                timeout_s=PEER_TIMEOUT_S,
                probe_interval_s=0.2,
                align=aligns[role],
                policy=LocalPolicy.load(TEST_POLICY),
            )
            daemons.append(PartyDaemon(config))
            daemons[-1].start()
        states = wait_until(
            lambda: (
                all("--align" in d.peer_state for d in daemons) and [d.peer_state for d in daemons]
            ),
            what="both handshakes to fail on --align",
        )
    finally:
        for daemon in daemons:
            daemon.stop(grace_s=0.5)
    for state in states:
        assert "runs --align psi" in state and "runs --align strict" in state, state
        assert "both daemons must use the same --align" in state


def test_party_data_is_sorted_by_id_so_intersections_line_up(overlapping):
    schema = Schema.load(str(overlapping / "schema.json"))
    for role in PARTY_ROLES:
        data = load_party_data(schema, role, overlapping / f"{role}.csv")
        assert list(data.ids) == sorted(data.ids)
