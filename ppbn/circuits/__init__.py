"""Boolean circuits: IR, Bristol Fashion io, builders, garbling, plaintext evaluation. No I/O, no networking.

Modules: ``ir`` (Circuit, Bundle, value/bit conversion: uint64 arrays up to 64 bits, object
arrays of Python ints above), ``bristol`` (read/write Bristol Fashion), ``schedule`` (AND-depth
layering and slot allocation, computed once per circuit), ``evaluate`` (bit-sliced plaintext
evaluation), ``builders`` (word-level adders, comparators, argmax with tolerance,
normalisation, fixed-point multiply and divide, with AND counts), ``garble`` (batched
half-gates garbling with free-XOR and a fixed-key AES hash). The two-party protocol on top is
``ppbn.protocols.yao``.
"""
