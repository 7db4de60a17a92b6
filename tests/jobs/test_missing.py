"""``--missing available-case``: a record with a missing cell is left out
of exactly the families that contain that variable, on the secure path (all-zero
indicator rows in the tables protocol) and in the plaintext reference alike."""

from __future__ import annotations

import json

import numpy as np
import pytest
from known_files import TEST_POLICY as KNOWN_POLICY
from timeouts import PEER_TIMEOUT_S
from waiting import wait_until

from ppbn.bn.k2 import CountsOracle, count_table
from ppbn.bn.learn import joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import Schema, Variable
from ppbn.bn.scores import family_score
from ppbn.data.party_data import MISSING_CODE, load_joined, load_party_data
from ppbn.errors import DataError
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.ledger import ALLOWED_KINDS, Ledger
from ppbn.protocols.tables import TablesConfig, crossing_families, reconstruct, run_tables

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)
TEST_POLICY = str(KNOWN_POLICY)


def blank(codes: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """A copy with ``rate`` of the cells set missing, uniformly at random."""
    rng = np.random.default_rng(seed)
    out = codes.astype(np.int64).copy()
    out[rng.random(out.shape) < rate] = MISSING_CODE
    return out


# -- the plaintext rule ---------------------------------------------------------------------------


def test_count_table_skips_records_missing_in_the_family():
    # columns a, b, c (binary); -1 = missing
    codes = np.array(
        [
            [0, 0, 1],
            [0, 1, -1],  # missing c: counts for (a, b), not for anything with c
            [-1, 1, 0],  # missing a
            [1, 1, 1],
            [1, -1, -1],
            [0, 0, 0],
        ]
    )
    ab = count_table(codes, [0, 1], [2, 2])
    assert ab.tolist() == [[2, 1], [0, 1]]  # rows 0, 1, 3, 5
    bc = count_table(codes, [1, 2], [2, 2])
    assert bc.tolist() == [[1, 1], [1, 1]]  # rows 0, 2, 3, 5
    abc = count_table(codes, [0, 1, 2], [2, 2, 2])
    assert abc.sum() == 3  # rows 0, 3, 5
    assert count_table(codes, [0], [2]).tolist() == [3, 2]
    assert count_table(codes, [2], [2]).tolist() == [2, 2]


def test_bic_penalty_keeps_the_public_record_count():
    table = np.array([[30.0, 10.0], [5.0, 15.0]])  # 60 complete records of n = 100
    plain = family_score(table, "bic")  # N = the table's own total
    public = family_score(table, "bic", n_records=100)
    assert public == pytest.approx(plain - np.log(100 / 60) / 2 * 2)
    oracle = CountsOracle(lambda fam: table.reshape(2, 2), "bic", n_records=100)
    assert oracle.score("b", ("a",)) == pytest.approx(public)


def test_paired_mode_does_not_favour_a_candidate_for_its_missing_cells():
    """y independent of both x and z; z is missing in 30% of records. Unpaired K2 compares
    y's score on all records with (z, y)'s on 70% of them and adds z; paired K2 compares
    both on the same 70% and adds nothing."""
    rng = np.random.default_rng(1)
    n = 2000
    codes = rng.integers(0, 2, size=(n, 3))
    codes[rng.random(n) < 0.3, 1] = MISSING_CODE
    names, states = ("x", "z", "y"), dict.fromkeys(("x", "z", "y"), ("0", "1"))
    count = joined_count_fn(names, states, codes)
    unpaired = CountsOracle(count, "exact", n_records=n)
    paired = CountsOracle(count, "exact", n_records=n, paired=True)
    assert unpaired.best_parent("y", (), ("x", "z"), 1e-3) == "z"
    assert paired.best_parent("y", (), ("x", "z"), 1e-3) is None
    # the paired gain is the score difference on the records complete in z
    table = count(("z", "y"))
    gain = family_score(table, "exact") - family_score(table.sum(axis=0).reshape(1, 2), "exact")
    assert paired.score("y", ("z",)) - paired.paired_score("y", (), "z") == pytest.approx(gain)


# -- loading --------------------------------------------------------------------------------------

SCHEMA = Schema(
    "id",
    (
        Variable("a", "alice", ("x", "y")),
        Variable("b", "alice", ("x", "y", "z")),
        Variable("c", "bob", ("x", "y")),
    ),
    missing_state="y",
)


def _write(tmp_path, alice: str, bob: str):
    (tmp_path / "alice.csv").write_text(alice)
    (tmp_path / "bob.csv").write_text(bob)
    return tmp_path / "alice.csv", tmp_path / "bob.csv"


def test_loader_codes_missing_cells_per_rule(tmp_path):
    alice_csv, bob_csv = _write(tmp_path, "id,a,b\n1,x,\n2,,z\n3,y,x\n", "id,c\n3,x\n1,\n2,y\n")
    data = load_party_data(SCHEMA, "alice", alice_csv, missing_rule="available-case")
    assert (
        data.codes.tolist() == [[0, -1], [-1, 2], [1, 0]] and data.missing_rule == "available-case"
    )
    with pytest.raises(
        DataError, match=r"line 3, column 'a': missing value \(pass --missing available-case"
    ):
        load_party_data(SCHEMA, "alice", alice_csv)
    # the alias and the new spelling agree
    assert load_party_data(SCHEMA, "bob", bob_csv, missing_as_category=True).codes.tolist() == [
        [1],
        [1],
        [0],
    ]
    assert load_party_data(SCHEMA, "bob", bob_csv, missing_rule="category").codes.tolist() == [
        [1],
        [1],
        [0],
    ]
    with pytest.raises(DataError, match="contradicts --missing available-case"):
        load_party_data(
            SCHEMA, "bob", bob_csv, missing_as_category=True, missing_rule="available-case"
        )
    names, codes = load_joined(SCHEMA, alice_csv, bob_csv, missing_rule="available-case")
    assert names == ("a", "b", "c") and codes.tolist() == [[0, -1, -1], [-1, 2, 1], [1, 0, 0]]


# -- the secure tables protocol -------------------------------------------------------------------


def test_secure_tables_leave_out_records_missing_in_the_family():
    cards = [2, 3, 2, 2, 3, 2]
    owners = ["alice", "bob", "alice", "bob", "bob", "alice"]
    schema = Schema(
        "id",
        tuple(
            Variable(f"v{i}", o, tuple(map(str, range(c))))
            for i, (c, o) in enumerate(zip(cards, owners, strict=True))
        ),
    )
    rng = np.random.default_rng(3)
    n = 300
    full = blank(np.stack([rng.integers(0, c, n) for c in cards], axis=1), 0.15, 4)
    full[:, 3] = np.where(full[:, 3] < 0, 0, full[:, 3])  # a column without missing cells
    families = crossing_families(schema, 3)
    families += [("v0", "v2"), ("v1", "v4"), ("v5",)]  # held by one party
    index = {v: i for i, v in enumerate(schema.names)}
    parts = {r: full[:, [index[v.name] for v in schema.owned_by(r)]] for r in ("alice", "bob")}
    config = TablesConfig(key_bits=1024, chunk_size=64, workers=1)

    def party(role):
        return lambda ch: run_tables(ch, role, schema, parts[role], families, config)

    alice, bob = run_two_party(party("alice"), party("bob"), timeout_s=120)
    counts = reconstruct(alice, bob)
    for family in families:
        expected = count_table(full, [index[v] for v in family], schema.cardinalities(family))
        np.testing.assert_array_equal(
            counts[family].astype(np.int64), expected, err_msg=str(family)
        )


# -- the secure path equals the reference ---------------------------------------------------------


def _schema(net) -> Schema:
    return Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )


def _learn_both(net, codes, config):
    schema = _schema(net)
    column = {v: i for i, v in enumerate(net.names)}
    ledgers = {r: Ledger(r) for r in ("alice", "bob")}

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]
        return lambda ch: learn_secure(ch, role, schema, codes[:, mine], config, ledgers[role])

    alice, bob = run_two_party(side("alice"), side("bob"), pair=memory_channel_pair(timeout_s=300))
    return alice, bob, ledgers


@pytest.mark.parametrize("mode", ["exact", "bic"])
def test_secure_equals_reference_with_blanked_cells(mode):
    net = load_network("asia")
    codes = blank(sample(net, 1000, 5), 0.05, 6)
    config = SecureLearnConfig(max_parents=2, mode=mode, tables=TEST_TABLES, available_case=True)
    alice, bob, ledgers = _learn_both(net, codes, config)
    reference = learn_reference(net.names, net.states, codes, 2, mode)
    assert alice.search.edges == reference.search.edges == bob.search.edges
    count = joined_count_fn(net.names, net.states, codes)
    expected = {v: int(count((*reference.search.parents[v], v)).sum()) for v in net.names}
    assert alice.family_records == bob.family_records == expected
    assert min(expected.values()) < 1000  # the blanking did remove records from families
    for v in net.names:
        np.testing.assert_allclose(alice.network.cpts[v], reference.network.cpts[v], atol=1e-9)
        assert alice.network.unobserved.get(v, ()) == reference.network.unobserved.get(v, ())
    for role in ("alice", "bob"):
        assert ledgers[role].kinds() <= ALLOWED_KINDS
        revealed = [e.value for e in ledgers[role].entries if e.kind == "family_records"]
        assert revealed == [expected]


def test_available_case_without_missing_cells_is_the_plain_run():
    net = load_network("asia")
    codes = sample(net, 600, 8)
    plain = SecureLearnConfig(max_parents=2, tables=TEST_TABLES)
    avail = SecureLearnConfig(max_parents=2, tables=TEST_TABLES, available_case=True)
    a_plain, _, _ = _learn_both(net, codes, plain)
    a_avail, _, ledgers = _learn_both(net, codes, avail)
    assert a_plain.search.edges == a_avail.search.edges
    for v in net.names:
        np.testing.assert_array_equal(a_plain.network.cpts[v], a_avail.network.cpts[v])
    assert a_plain.family_records is None
    assert a_avail.family_records == dict.fromkeys(net.names, 600)


def test_result_json_lists_family_records():
    from ppbn.jobs.learn import family_records_json

    assert family_records_json({"a": 90, "b": 100}, 100, "available-case", ("a", "b")) == {
        "rule": "available-case",
        "records": 100,
        "families": {"a": 90, "b": 100},
    }
    assert family_records_json(None, 100, "error", ("a", "b"))["families"] == {"a": 100, "b": 100}


# -- both daemons run the same rule; the PRAM path refuses available-case -------------------------


def test_hello_mismatch_names_the_rule_on_both_sides():
    from ppbn.parties.daemon import PROTOCOL_VERSION, hello_mismatch, parties_mismatch
    from ppbn.proto import party_pb2

    def hello(role, rule):
        return party_pb2.Hello(
            role=role,
            protocol_version=PROTOCOL_VERSION,
            schema_fingerprint="f",
            record_count=5,
            missing_rule=rule,
        )

    expected = "alice runs --missing available-case, bob runs --missing error: both daemons must use the same --missing"
    assert (
        hello_mismatch(hello("bob", "error"), hello("alice", "available-case"), "alice") == expected
    )
    assert (
        hello_mismatch(hello("alice", "available-case"), hello("bob", ""), "bob") == expected
    )  # "" = older daemon
    assert parties_mismatch(hello("alice", "available-case"), hello("bob", "error")) == expected
    assert hello_mismatch(hello("alice", "category"), hello("bob", "category"), "bob") is None


@pytest.fixture
def daemon_world(tmp_path):
    schema = {
        "id_column": "id",
        "variables": [
            {"name": n, "owner": o, "states": ["s0", "s1"]}
            for n, o in (("a", "alice"), ("b", "bob"))
        ],
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    ids = [f"r{i:02d}" for i in range(30)]
    (tmp_path / "alice.csv").write_text(
        "id,a\n" + "".join(f"{r},{'' if i % 7 == 0 else 's1'}\n" for i, r in enumerate(ids))
    )
    (tmp_path / "bob.csv").write_text(
        "id,b\n" + "".join(f"{r},{'s0' if i % 2 else ''}\n" for i, r in enumerate(ids))
    )
    return tmp_path


def _daemons(world, rules: dict[str, str]):
    from ppbn.pair.loopback import free_port
    from ppbn.parties.daemon import DaemonConfig, PartyDaemon

    ports = {"alice": free_port(), "bob": free_port()}
    started = []
    for role, rule in rules.items():
        peer = "bob" if role == "alice" else "alice"
        config = DaemonConfig(
            role=role,
            schema_path=str(world / "schema.json"),
            data_path=str(world / f"{role}.csv"),
            listen=f"127.0.0.1:{ports[role]}",
            peer=f"127.0.0.1:{ports[peer]}",
            insecure=True,
            out_dir=str(world / f"out-{role}"),
            timeout_s=PEER_TIMEOUT_S,
            probe_interval_s=0.2,
            missing_rule=rule,
        )
        daemon = PartyDaemon(config)
        daemon.start()
        started.append(daemon)
    return started, ports


def _settled(daemon) -> str:
    state = daemon.peer_state
    return "" if state == "not contacted yet" or "refused the connection" in state else state


def test_handshake_and_pram_refusal_between_live_daemons(daemon_world):
    from ppbn.errors import UserError
    from ppbn.parties.client import DaemonClient

    # bob's file has no empty cells in this variant, so both rules load it
    (daemon_world / "bob.csv").write_text(
        "id,b\n" + "".join(f"r{i:02d},s{i % 2}\n" for i in range(30))
    )
    daemons, ports = _daemons(daemon_world, {"alice": "available-case", "bob": "error"})
    try:
        alice, bob = daemons
        wait_until(lambda: _settled(alice) and _settled(bob), what="handshake outcome")
        for daemon in daemons:
            assert (
                "alice runs --missing available-case, bob runs --missing error" in daemon.peer_state
            )
    finally:
        for d in daemons:
            d.stop(grace_s=0.5)
    daemons, ports = _daemons(daemon_world, {"alice": "available-case", "bob": "available-case"})
    try:
        alice, bob = daemons
        wait_until(lambda: alice.peer_state == "ok" and bob.peer_state == "ok", what="handshake")
        with (
            DaemonClient(f"127.0.0.1:{ports['alice']}", None, "operator", True) as client,
            pytest.raises(UserError, match="--missing available-case runs on the secure path only"),
        ):
            client.start("pram", {"p": 0.3, "max_parents": 1})
    finally:
        for d in daemons:
            d.stop(grace_s=0.5)


def test_simulate_refuses_available_case_on_the_pram_path(capsys):
    from ppbn.cli import main as ppbn_main

    code = ppbn_main(
        [
            "simulate",
            "--network",
            "asia",
            "--records",
            "200",
            "--path",
            "pram",
            "--p",
            "0.3",
            "--missing",
            "available-case",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "secure path only" in err[0]


def test_simulate_available_case_equals_the_reference(capsys):
    """Both daemons as processes over mutual TLS, 5% of asia's cells emptied at random."""
    from ppbn.cli import main as ppbn_main

    code = ppbn_main(
        [
            "simulate",
            "--network",
            "asia",
            "--records",
            "1000",
            "--missing-rate",
            "0.05",
            "--missing",
            "available-case",
            "--params",
            json.dumps({"key_bits": 1024}),
            "--policy",
            TEST_POLICY,
            "--format",
            "json",
            "--timeout",
            f"{PEER_TIMEOUT_S:g}",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    check = report["reference_check"]
    assert check["same_structure_and_order"] and check["max_abs_cpt_difference"] < 1e-9
    assert check["same_family_records"]
    families = report["result"]["family_records"]["families"]
    assert families == check["reference_family_records"] and min(families.values()) < 1000
