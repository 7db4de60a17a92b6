"""The benchmarks' engines: each runs a measurement and returns its report as a dict, so
that ``ppbn bench ...`` only parses flags and prints, and a script can run the same
measurement from Python."""
