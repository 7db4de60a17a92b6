"""The roles of certificates and daemons, and the certificates' lifetimes, without grpc or
cryptography: importing this module loads nothing beyond the standard library, so the
command line can show them in its help (``ppbn --help`` stays fast). ``parties.tls`` and
``parties.pki`` take them from here (and ``parties.tls`` still offers the roles)."""

from __future__ import annotations

PARTY_ROLES = ("alice", "bob")
MINER = "miner"  # the data miner of the PRAM path's setup II: a daemon without data
DAEMON_ROLES = (*PARTY_ROLES, MINER)
OPERATOR = "operator"
ROLES = (*DAEMON_ROLES, OPERATOR)
EXPIRY_WARNING_DAYS = 30

LEAF_DAYS = 397  # the CA/Browser Forum's ceiling: renewal stays a yearly habit
CA_DAYS = 1825
