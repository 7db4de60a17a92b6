"""Compiled kernels: the hot loops of the OT extension, garbling, the table lookup's pads
and the OLE shares, as numba functions.

numba compiles these numpy-style loops to machine code on first use and keeps the result
in its on-disk cache (``jit``: beside this package, in the user's cache folder or under
``NUMBA_CACHE_DIR``), so a later process loads them in a fraction of a second. Every
kernel releases the interpreter lock: two parties in one process, or the blocks of one
party on threads, run them side by side. AES stays in OpenSSL (``cryptography``), called
on large buffers; the kernels do the XOR folding, bit transposition, label bookkeeping
and share sums around it, in one pass where numpy needed several. The choice and its
measurements: docs/decisions/compiled-core.md.
"""
