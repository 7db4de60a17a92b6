"""The gRPC daemon and nothing else: service, job runner, handshake, gRPC channel, client,
health, metrics, audit log, logs, TLS at run time and the offline certificate tooling."""
