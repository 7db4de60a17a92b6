"""Where numba finds no writable cache, a kernel still compiles (in each process), and the
log says so once instead of the import failing."""

from __future__ import annotations

import logging

import numba.core.caching
import numpy as np

from ppbn.kernels import jit


def _double(x: np.ndarray) -> np.ndarray:
    return x * 2


def _triple(x: np.ndarray) -> np.ndarray:
    return x * 3


def test_without_a_writable_cache_kernels_compile_and_say_so_once(monkeypatch, caplog):
    monkeypatch.setattr(numba.core.caching.CacheImpl, "_locator_classes", [])
    monkeypatch.setattr(jit, "_uncached", [])  # the process has said nothing yet
    with caplog.at_level(logging.WARNING, logger="ppbn.kernels.jit"):
        double, triple = jit.kernel(_double), jit.kernel(_triple)
        assert double(np.arange(3)).tolist() == [0, 2, 4]
        assert triple(np.arange(3)).tolist() == [0, 3, 6]
    warnings = [r for r in caplog.records if "NUMBA_CACHE_DIR" in r.getMessage()]
    assert len(warnings) == 1
    assert double.stats.cache_path is None and triple.stats.cache_path is None  # no disk cache


def test_with_a_cache_nothing_is_said(caplog):
    with caplog.at_level(logging.WARNING, logger="ppbn.kernels.jit"):
        double = jit.kernel(_double)
        assert double(np.arange(2)).tolist() == [0, 2]
    assert not caplog.records and double.stats.cache_path is not None


def test_warm_up_calls_every_kernel_and_counts_them():
    """Every compiled kernel is called (a new kernel missing from the warm-up fails here),
    each signature counted once as compiled or loaded."""
    from ppbn.kernels import bits, garbling, lookup, ring
    from ppbn.kernels.warm import warm_up

    report = warm_up()
    kernels = [
        getattr(module, name)
        for module in (bits, garbling, lookup, ring)
        for name in dir(module)
        if isinstance(getattr(module, name), jit.Kernel)
    ]
    assert kernels and all(k.signatures for k in kernels), [
        k.__name__ for k in kernels if not k.signatures
    ]
    assert report["compiled"] + report["from_cache"] >= len(kernels)
    assert report["seconds"] >= 0


def test_the_protocols_import_without_numba():
    """numba loads at a kernel's first call: a daemon that never garbles does not pay for it."""
    import subprocess
    import sys

    code = (
        "import sys, ppbn.protocols.ot, ppbn.circuits.garble, ppbn.protocols.arith, "
        "ppbn.parties.daemon; print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
