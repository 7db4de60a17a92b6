"""Two-party protocols written against a Channel, never against grpc: sharing, OT, Paillier,
garbled circuits, PSI, the secure tables and the learning protocols built on them."""
