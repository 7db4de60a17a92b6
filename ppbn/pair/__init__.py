"""The loopback pair: two (or three) daemons as local processes, for ``ppbn.simulate``,
the demo and the benchmarks, and the link model that can sit between them."""
