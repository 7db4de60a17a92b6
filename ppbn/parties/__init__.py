"""The daemon side: gRPC service, sessions and jobs, TLS, config, data loading, ledger files."""
