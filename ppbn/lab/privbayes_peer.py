"""DataSynthesizer's PrivBayes as the peer of ``ppbn bench dp``: a trusted curator that
holds the joined table runs it in correlated attribute mode (every attribute categorical,
with the schema's public domain, degree ``k`` = our max parents) and releases synthetic
records, which come back here as codes. DataSynthesizer 0.1.13 (``pip install
'ppbn[bench]'``) is a bench extra, never a runtime dependency.

What its ``epsilon`` means (read in DataSynthesizer 0.1.13's source: ``DataDescriber.
describe_dataset_in_correlated_attribute_mode`` and ``lib/PrivBayes.py``):

- the network: ``greedy_bayes(epsilon / 2)``, PrivBayes's greedy search (Zhang et al.
  2017): m - 1 steps (m attributes, a random root), each the exponential
  mechanism over (child, k parents) pairs with the mutual information as utility, its
  sensitivity from PrivBayes's Lemma 1 (which holds the record count fixed: one record
  changed, our neighbours), each step at (epsilon / 2) / (m - 1). There is no "stop"
  option: every child takes min(k, placed) parents.
- the conditionals: ``construct_noisy_conditional_distributions(epsilon / 2)``: Laplace
  noise of scale (m - k) / (epsilon / 2) on the counts of m - k tables (the joint of the
  first k + 1 attributes, then each later family), clipped at 0 and normalised. That is
  epsilon / 2 for neighbours that add or remove one record (L1 sensitivity 1 per table,
  as its notebooks state); changing one record moves a count from one cell to another
  (L1 2 per table), so under our neighbours the conditionals cost epsilon, not epsilon / 2
  (PrivBayes's Algorithm 1 adds twice that noise, as its own bug tracker notes).
- before both, ``describe_dataset_in_independent_attribute_mode(epsilon)`` releases every
  attribute's 1-D histogram with Laplace noise at epsilon / m each: a third epsilon, in
  the description file. The synthetic records use those histograms only for a record
  whose parent configuration has no conditional distribution, which never happens on
  complete data; so they are left out of the release compared here.
- outside the accounting: the conditionals cover the codes up to the largest one that
  occurs in the data, and whether an attribute is binary (which picks the sensitivity)
  is read from the data, not the domain; the noise is floating-point Laplace.

So the synthetic records of DataSynthesizer's ``epsilon`` are (epsilon / 2 + epsilon) =
1.5 epsilon-DP under ppbn's notion (one record's values differ, the count public), and its
whole description 2.5 epsilon. ``matched_epsilon`` gives the epsilon to hand it so that
its synthetic records are as private as ppbn's release at the same epsilon.

Cost: the greedy search computes the mutual information of every (child, parent set)
candidate with scikit-learn on string labels (each record's parents joined into one
string by a pandas apply), in a fresh process pool per step that is sent the whole table
with every task: sum_t (m - t) C(t, k) candidates, 73,851 on alarm (m = 37) at k = 2. On
a 2-core Xeon, asia (8 attributes, 20,000 records, k = 2) took 27 s; on alarm with
20,000 records the first 8 of the 36 greedy steps took 527 s for 1,786 candidates
(0.3 s each), which puts one alarm run at about 6 hours.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppbn.errors import UserError

MISSING = "ppbn bench dp compares with DataSynthesizer's PrivBayes: pip install 'ppbn[bench]'"
# ppbn's epsilon of DataSynthesizer's synthetic records, per unit of its nominal epsilon
RELEASE_FACTOR = 1.5
LABEL_PREFIX = "s"  # states travel as s0, s1, ...: never read as numbers, booleans or dates


def require_datasynthesizer() -> None:
    """UserError (one line: how to install it) when DataSynthesizer is not installed."""
    try:
        import DataSynthesizer  # noqa: F401
    except ImportError:
        raise UserError(MISSING) from None


def matched_epsilon(epsilon: float) -> float:
    """The epsilon to give DataSynthesizer so that its synthetic records are epsilon-DP
    under ppbn's neighbours (see the module's docstring)."""
    return epsilon / RELEASE_FACTOR


@dataclass(frozen=True)
class PrivBayesRun:
    codes: np.ndarray  # the synthetic records, columns in the order of ``names``
    parents: dict[str, tuple[str, ...]]  # the network DataSynthesizer learned
    epsilon: float  # what DataSynthesizer was given
    seconds: float  # describing (network and conditionals) and generating


def fast_mutual_information(labels_x, labels_y) -> float:
    """DataSynthesizer's ``mutual_information`` (sklearn's ``mutual_info_score`` of a column
    and the joined labels of several, in nats) from integer codes: the same value to
    floating-point rounding (``tests/lab/test_privbayes_peer.py``), without joining every
    row's labels into a string, which takes 0.3 s per candidate on 20,000 records and puts
    one alarm run at hours. Only the speed of the peer changes, not its algorithm."""
    import pandas as pd

    frame = labels_y if isinstance(labels_y, pd.DataFrame) else labels_y.to_frame()
    x = pd.factorize(labels_x)[0]
    y = np.zeros(len(frame), dtype=np.int64)
    for column in frame.columns:
        codes, uniques = pd.factorize(frame[column])
        y = y * len(uniques) + codes
    y = pd.factorize(y)[0]
    nx, ny = int(x.max()) + 1, int(y.max()) + 1
    joint = np.bincount(x * ny + y, minlength=nx * ny).reshape(nx, ny).astype(float)
    total = joint.sum()
    rows, cols = joint.sum(axis=1), joint.sum(axis=0)
    i, j = np.nonzero(joint)
    cell = joint[i, j]
    return float(np.sum(cell / total * (np.log(cell * total) - np.log(rows[i] * cols[j]))))


def _install_fast_mutual_information() -> None:
    """Every pool worker's DataSynthesizer computes with ``fast_mutual_information``."""
    from DataSynthesizer.lib import PrivBayes

    PrivBayes.mutual_information = fast_mutual_information


def _forkserver_pool(*args, **kwargs):
    """DataSynthesizer's worker pool, started from a fork server instead of by forking this
    process: forking a process that holds gRPC or Ray threads can crash it (a segmentation
    fault, seen under the test runner). The workers install ``fast_mutual_information``."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, "DataSynthesizer.lib.PrivBayes"])
    return context.Pool(*args, initializer=_install_fast_mutual_information, **kwargs)


@contextlib.contextmanager
def _fast_and_fork_free():
    """DataSynthesizer's greedy search with ``fast_mutual_information``, in this process and
    in its pool's workers, which ``_forkserver_pool`` starts."""
    from DataSynthesizer.lib import PrivBayes

    original = PrivBayes.mutual_information, PrivBayes.Pool
    PrivBayes.mutual_information, PrivBayes.Pool = fast_mutual_information, _forkserver_pool
    try:
        yield
    finally:
        PrivBayes.mutual_information, PrivBayes.Pool = original


def _label(code: int) -> str:
    return f"{LABEL_PREFIX}{code}"


def privbayes_synthesize(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    epsilon: float,
    k: int,
    records: int,
    seed: int,
    work: str | Path,
) -> PrivBayesRun:
    """``records`` synthetic records from DataSynthesizer's correlated attribute mode on
    ``codes`` (columns in ``names`` order) at its ``epsilon`` and degree ``k``; its files
    (input CSV, domains, description, synthetic CSV) are written under ``work``."""
    require_datasynthesizer()
    import pandas as pd
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    if k < 1:
        raise UserError("DataSynthesizer's PrivBayes needs a degree (max parents) of at least 1")
    if not epsilon > 0:
        raise UserError("DataSynthesizer turns differential privacy off at epsilon 0")
    names = list(names)
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    real, domains = work / "real.csv", work / "domains.json"
    description, synthetic = work / "description.json", work / "synthetic.csv"
    pd.DataFrame({v: [_label(int(c)) for c in codes[:, j]] for j, v in enumerate(names)}).to_csv(
        real, index=False
    )
    domains.write_text(json.dumps({v: [_label(i) for i in range(len(states[v]))] for v in names}))
    started = time.perf_counter()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        _fast_and_fork_free(),
    ):
        warnings.simplefilter("ignore")
        describer = DataDescriber(category_threshold=max(len(states[v]) for v in names))
        describer.describe_dataset_in_correlated_attribute_mode(
            str(real),
            k=k,
            epsilon=epsilon,
            attribute_to_datatype=dict.fromkeys(names, "String"),
            attribute_to_is_categorical=dict.fromkeys(names, True),
            attribute_to_is_candidate_key=dict.fromkeys(names, False),
            categorical_attribute_domain_file=str(domains),
            seed=seed,
        )
        describer.save_dataset_description_to_file(str(description))
        generator = DataGenerator()
        generator.generate_dataset_in_correlated_attribute_mode(records, str(description), seed)
        generator.save_synthetic_data(str(synthetic))
    seconds = time.perf_counter() - started
    frame = pd.read_csv(synthetic, dtype=str, keep_default_na=False)
    out = np.empty((len(frame), len(names)), dtype=np.int64)
    for j, v in enumerate(names):
        known = {_label(i): i for i in range(len(states[v]))}
        column = frame[v].tolist()
        bad = next((x for x in column if x not in known), None)
        if bad is not None:
            raise RuntimeError(f"DataSynthesizer wrote {bad!r} for {v!r}, not one of its states")
        out[:, j] = [known[x] for x in column]
    parents = {v: () for v in names}
    for child, ps in describer.bayesian_network:
        parents[child] = tuple(ps)
    return PrivBayesRun(out, parents, float(epsilon), seconds)
