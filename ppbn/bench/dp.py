"""The ``bench dp`` engine: how useful the differentially private network is, against epsilon.

For each seed, ``records`` records of the network are sampled (``ppbn datasets make``'s
sampler, the data set the secure job reads too); for each epsilon each method releases a
network or a model, ``synthetic_records`` records are sampled from it (the same stream for
every method), and the synthetic table is measured against the real one
(``ppbn.lab.dp_utility``): the average total variation distance of all 2-way marginals, of
a sample of 3-way marginals, the structural Hamming distance of the released network to the
true one (none for a model that is no network), and the accuracy of a naive Bayes
classifier trained on the synthetic records and tested on held-out real ones (sampled from
the true network with another seed) predicting ``target``, the true network's variable
with the largest Markov blanket; the classifier trained on the real records is the
anchor (``real``). The methods (``METHODS``, in the order of ``DP_METHODS``):

- ``ppbn``: the secure two-party DP learn job between two local daemons
  (``secure_release``), for the first ``secure_seeds`` seeds only (it is slow); its
  seconds and bytes are the job's own;
- ``twin``: the same mechanism run by a trusted curator in the clear (``ppbn.dp.reference``);
- ``ppbn-marginals`` and ``marginals-twin``: the marginal release (``--dp-release
  marginals``: MST's steps with no curator), secure (first ``secure_seeds`` seeds) and its
  curator's twin (``ppbn.dp.marginal_release``);
- ``ppbn-adaptive`` and ``adaptive-twin``: the adaptive release (``--dp-release adaptive``:
  AIM's rounds with no curator), secure and its twin (``ppbn.dp.adaptive_release``);
- ``privbayes``: DataSynthesizer's PrivBayes on the joined table (``ppbn.lab.privbayes_peer``)
  at the same epsilon as DataSynthesizer states it; ``privbayes-matched``: given
  epsilon / 1.5, which makes its synthetic records epsilon-DP under ppbn's neighbours (one
  record changed; see that module);
- ``mst`` and ``aim``: the state of the art of marginal-based synthetic data, run by a
  trusted curator at (epsilon, ``DEFAULT_DELTA``) under ppbn's neighbours
  (``ppbn.lab.curator_mst``, ``ppbn.lab.curator_aim``; AIM capped at ``AIM_MAX_ROUNDS``);
- ``exact``: the non-private K2 of the same score (what the secure job learns without DP),
  once per seed: the horizontal line of the plot.

A method is one entry of ``METHODS``: a function from the ``Trial`` to its ``Released``.
``bench_dp_networks`` runs the whole matrix over several networks. The report, the tables
and the files of ``out`` are ``ppbn.bench.dp_report``'s.

    report = bench_dp(DpSettings("cancer", 300, epsilons=(1.0,), methods=("twin", "exact")))
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bench.constants import DP_METHODS
from ppbn.bench.pair_runs import LearnRun, run_learn
from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from ppbn.bn.model import BayesNet
    from ppbn.data.datasets import MadeDataset

PRIVBAYES = ("privbayes", "privbayes-matched")
SECURE = ("ppbn", "ppbn-marginals", "ppbn-adaptive")  # the first ``secure_seeds`` seeds only
SLOW = (*SECURE, *PRIVBAYES, "adaptive-twin", "mst", "aim")  # a progress line as each starts
AIM_MAX_ROUNDS = 12  # a round compiles a new JAX fit, 2-6 s on 2 busy cores (curator_aim)


@dataclass(frozen=True)
class DpSettings:
    """One ``bench dp`` run: ``seeds`` data sets of ``records`` records of ``network`` (a
    bundled name, or a network read from a BIF file and called ``name``; the first seed
    ``seed``), each method of ``methods`` at each of ``epsilons`` (the exact network once per
    seed), ``synthetic_records`` (None: ``records``) sampled from each release; the secure
    job on the first ``secure_seeds`` seeds only; ``target`` (None: the true network's
    variable with the largest Markov blanket) predicted by the classifier; ``aim_way``:
    AIM's workload, every 2-way or every 3-way marginal."""

    network: str | BayesNet = "asia"
    records: int = 20000
    synthetic_records: int | None = None
    max_parents: int = 2
    score: str = "exact"
    epsilons: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
    seeds: int = 5
    seed: int = 7
    methods: tuple[str, ...] = DP_METHODS
    secure_seeds: int = 1
    target: str | None = None
    name: str | None = None
    aim_way: int = 2  # AIM's workload: every 2-way (or 3-way) marginal

    @property
    def synthetic(self) -> int:
        return self.synthetic_records or self.records

    @property
    def label(self) -> str:
        """The network's name in the report."""
        return self.name or (self.network if isinstance(self.network, str) else "ppbn")


@dataclass(frozen=True)
class Trial:
    """One method's run: the seed's data set (written in ``folder``) at ``epsilon`` (0 for
    the exact network)."""

    settings: DpSettings
    made: MadeDataset
    folder: Path
    seed: int
    epsilon: float

    @property
    def rng(self) -> np.random.Generator:
        """The mechanism's noise, one stream per seed and epsilon."""
        import numpy as np

        return np.random.default_rng([self.seed, round(self.epsilon * 1e6)])

    @property
    def cards(self) -> list[int]:
        return [v.cardinality for v in self.made.schema.variables]


@dataclass(frozen=True)
class Released:
    """What a method released: ``draw(rows, seed)`` samples synthetic records from it (not
    timed); ``parents`` is its network (None: a model that is no network, SHD "-");
    ``seconds`` the method's own time (None: the call's), ``sent`` its bytes."""

    draw: Callable[[int, int], np.ndarray]
    parents: dict[str, tuple[str, ...]] | None
    seconds: float | None = None
    sent: int | None = None


def bench_dp(
    settings: DpSettings,
    progress: Callable[[str], None] | None = None,
    out: str | Path | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Every run (a line to ``progress`` as each slow one starts and as each ends) and the
    report; with ``out`` also its files there (a bad folder refused before any run)."""
    from ppbn.bench.dp_report import write_outputs

    _check_settings(settings, out, force)
    report = _run_network(settings, progress or (lambda text: None))
    if out:
        write_outputs([report], out, force)
    return report


def bench_dp_networks(
    settings: DpSettings,
    networks: Sequence[str],
    progress: Callable[[str], None] | None = None,
    out: str | Path | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """``bench_dp`` on each of ``networks`` with the same settings: the reports keyed by
    network; with ``out`` one runs.csv (its network column) and a plot per network."""
    from ppbn.bench.dp_report import matrix_report, write_outputs

    _check_settings(settings, out, force)
    tell = progress or (lambda text: None)
    reports = []
    for network in networks:
        tell(f"{network}:")
        reports.append(_run_network(replace(settings, network=network, name=None), tell))
    if out:
        write_outputs(reports, out, force)
    return matrix_report(reports)


def _check_settings(settings: DpSettings, out: str | Path | None, force: bool) -> None:
    """Refuse, before any run, unknown methods, a bad output folder and a missing peer."""
    from ppbn.data.outputs import check_output_dir

    unknown = [m for m in settings.methods if m not in DP_METHODS]
    if unknown or not settings.methods:
        raise UserError(f"methods are a comma list of {', '.join(DP_METHODS)} (got {unknown})")
    if out:
        check_output_dir(out, force=force)
    if set(PRIVBAYES) & set(settings.methods):
        from ppbn.lab.privbayes_peer import require_datasynthesizer

        require_datasynthesizer()
    if {"mst", "aim"} & set(settings.methods):
        from ppbn.dp.graphical_fit import load_mbi

        load_mbi()  # private-pgm's JAX set up once, before the first timed run


def _run_network(settings: DpSettings, tell: Callable[[str], None]) -> dict[str, Any]:
    """Every seed, epsilon and method on one network, and its report."""
    from ppbn.bench.dp_report import dp_report
    from ppbn.bn.networks import load_network, sample
    from ppbn.data.datasets import make_dataset
    from ppbn.dp.graphical_fit import forget_compiled
    from ppbn.lab.dp_utility import largest_blanket, naive_bayes_accuracy

    network = settings.network  # read once, not once per seed
    network = load_network(network) if isinstance(network, str) else network
    runs: list[dict[str, Any]] = []
    real: list[float] = []
    target = settings.target
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-dp-"))
    try:
        for index in range(settings.seeds):
            seed = settings.seed + index
            folder = work / f"data-{seed}"
            made = make_dataset(network, settings.records, seed, folder, name=settings.label)
            names = list(made.schema.names)
            if index == 0:
                _check_epsilons(settings, made)
                target = target or largest_blanket(made.truth.names, made.truth.parents)
                if target not in names:
                    raise UserError(f"--target: {target!r} is no variable of {settings.label}")
            held_out = sample(made.truth, settings.records, 20_000 + seed)  # schema order
            cards = [v.cardinality for v in made.schema.variables]
            column = names.index(target)
            real.append(naive_bayes_accuracy(made.codes, held_out, cards, column))
            for method in settings.methods:
                if method in SECURE and index >= settings.secure_seeds:
                    continue
                for eps in settings.epsilons if method != "exact" else (None,):
                    at = "no DP" if eps is None else f"epsilon {eps:g}"
                    if method in SLOW:
                        tell(f"  seed {seed}, {at}, {method}: running ...")
                    trial = Trial(settings, made, folder, seed, eps or 0.0)
                    figures = _run_method(trial, method, held_out, column)
                    runs.append(
                        {"network": settings.label, "epsilon": eps, "seed": seed, "method": method}
                        | figures
                    )
                    shd = "-" if figures["shd"] is None else figures["shd"]
                    tell(
                        f"  seed {seed}, {at}, {method}: 2-way TVD {figures['tvd2']:.4f}, "
                        f"SHD {shd}, accuracy {figures['accuracy']:.3f}, "
                        f"{figures['seconds']:.1f} s"
                    )
            forget_compiled()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dp_report(_header(settings, target or ""), runs, real)


def _header(settings: DpSettings, target: str) -> dict[str, Any]:
    """The report's settings, keys in the order people read them."""
    return {
        "network": settings.label,
        "records": settings.records,
        "synthetic_records": settings.synthetic,
        "max_parents": settings.max_parents,
        "score": settings.score,
        "epsilons": list(settings.epsilons),
        "seeds": [settings.seed + i for i in range(settings.seeds)],
        "secure_seeds": min(settings.secure_seeds, settings.seeds)
        if "ppbn" in settings.methods
        else 0,
        "methods": list(settings.methods),
        "aim_max_rounds": AIM_MAX_ROUNDS if "aim" in settings.methods else None,
        "aim_way": settings.aim_way if "aim" in settings.methods else None,
        "target": target,
    }


def secure_release(
    data: Path, max_parents: int, score: str, epsilon: float, release: str = "network"
) -> LearnRun:
    """The secure DP learn job between two local daemons on a data folder (schema.json,
    alice.csv, bob.csv), their PKI and outputs in a folder beside it; ``release``: what it
    releases (``dp_release``; a marginal release chooses pairs, whatever ``max_parents``)."""
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki
    from ppbn.parties.tls import PARTY_ROLES
    from ppbn.protocols.constants import DEFAULT_TIMEOUT_S

    work = data.parent / f"secure-{release}-{data.name}-{epsilon:g}"
    make_local_pki(work / "certs", PARTY_ROLES)
    csvs = {r: data / f"{r}.csv" for r in PARTY_ROLES}
    files = PairFiles(data / "schema.json", csvs, work / "certs", work)
    params = {"score": score, "dp_epsilon": epsilon, "dp_release": release}
    if release == "network":
        params["max_parents"] = max_parents
    with LocalPair(files, DEFAULT_TIMEOUT_S) as pair:
        return run_learn(pair, params, failed=f"the secure DP job failed (epsilon {epsilon:g})")


def _network(net: BayesNet, seconds: float | None = None, sent: int | None = None) -> Released:
    """A released network: records drawn by the project's forward sampler."""
    from ppbn.bn.networks import sample

    return Released(lambda rows, seed: sample(net, rows, seed), net.parents, seconds, sent)


def _model(model: Any, names: Sequence[str]) -> Released:
    """A released graphical model (no network): records drawn by private-pgm."""
    from ppbn.dp.graphical_fit import synthetic_codes

    return Released(lambda rows, seed: synthetic_codes(model, names, rows, seed), None)


def release_exact(trial: Trial) -> Released:
    from ppbn.bn.learn import learn_reference

    s, made = trial.settings, trial.made
    states = {v.name: v.states for v in made.schema.variables}
    return _network(
        learn_reference(made.schema.names, states, made.codes, s.max_parents, s.score).network
    )


def release_twin(trial: Trial) -> Released:
    from ppbn.dp.reference import dp_learn
    from ppbn.protocols.fixedpoint import SCORE_FRAC

    s, made = trial.settings, trial.made
    states = {v.name: v.states for v in made.schema.variables}
    net, _ = dp_learn(
        made.schema.names, states, made.codes, trial.epsilon, s.max_parents, s.score,
        rng=trial.rng, score_frac=SCORE_FRAC,
    )  # fmt: skip
    return _network(net)


def release_secure(trial: Trial, release: str = "network") -> Released:
    from ppbn.lab.compare import network_from_json

    s = trial.settings
    run = secure_release(trial.folder, s.max_parents, s.score, trial.epsilon, release)
    stats = [x for x in (run.outcome.stats, run.outcome.peer_stats) if x]
    sent = sum(int(x.get("bytes_sent", 0)) for x in stats)
    return _network(network_from_json(run.learned, trial.made.schema), run.wall_s, sent)


def release_marginals_twin(trial: Trial) -> Released:
    from ppbn.dp.marginal_release import marginal_twin

    made = trial.made
    states = {v.name: v.states for v in made.schema.variables}
    net, _, _ = marginal_twin(made.schema.names, states, made.codes, trial.epsilon, trial.rng)
    return _network(net)


def release_adaptive_twin(trial: Trial) -> Released:
    from ppbn.dp.adaptive_release import adaptive_twin

    made = trial.made
    states = {v.name: v.states for v in made.schema.variables}
    net, _, _ = adaptive_twin(made.schema.names, states, made.codes, trial.epsilon, trial.rng)
    return _network(net)


def release_privbayes(trial: Trial, matched: bool = False) -> Released:
    from ppbn.lab.privbayes_peer import matched_epsilon, privbayes_synthesize

    s, made = trial.settings, trial.made
    states = {v.name: v.states for v in made.schema.variables}
    given = matched_epsilon(trial.epsilon) if matched else trial.epsilon
    method = "privbayes-matched" if matched else "privbayes"
    release = privbayes_synthesize(
        made.schema.names, states, made.codes, given, s.max_parents, s.synthetic,
        10_000 + trial.seed, trial.folder.parent / f"{method}-{trial.seed}-{trial.epsilon:g}",
    )  # fmt: skip
    return Released(lambda rows, seed: release.codes, release.parents, release.seconds)


def release_mst(trial: Trial) -> Released:
    from ppbn.dp.constants import DEFAULT_DELTA
    from ppbn.lab.curator_mst import mst_release

    names = trial.made.schema.names
    release = mst_release(
        names, trial.cards, trial.made.codes, trial.epsilon, DEFAULT_DELTA, trial.rng
    )
    return _model(release.model, names)


def release_aim(trial: Trial) -> Released:
    from ppbn.dp.constants import DEFAULT_DELTA
    from ppbn.lab.curator_aim import aim_release

    names, made = trial.made.schema.names, trial.made
    release = aim_release(
        names, trial.cards, made.codes, trial.epsilon, DEFAULT_DELTA, trial.rng,
        way=trial.settings.aim_way, max_rounds=AIM_MAX_ROUNDS,
    )  # fmt: skip
    return _model(release.model, names)


METHODS: dict[str, Callable[[Trial], Released]] = {
    "ppbn": release_secure,
    "twin": release_twin,
    "ppbn-marginals": lambda trial: release_secure(trial, release="marginals"),
    "marginals-twin": release_marginals_twin,
    "ppbn-adaptive": lambda trial: release_secure(trial, release="adaptive"),
    "adaptive-twin": release_adaptive_twin,
    "privbayes": release_privbayes,
    "privbayes-matched": lambda trial: release_privbayes(trial, matched=True),
    "mst": release_mst,
    "aim": release_aim,
    "exact": release_exact,
}


def _run_method(trial: Trial, method: str, held_out: np.ndarray, target: int) -> dict[str, Any]:
    """One method's release, timed, sampled from and measured."""
    import numpy as np

    from ppbn.lab.dp_utility import (
        naive_bayes_accuracy,
        structural_hamming_distance,
        tvd_2way,
        tvd_3way,
    )

    started = time.perf_counter()
    released = METHODS[method](trial)
    seconds = time.perf_counter() - started if released.seconds is None else released.seconds
    synth = released.draw(trial.settings.synthetic, 10_000 + trial.seed)  # one stream for all
    real, cards, parents = trial.made.codes, trial.cards, released.parents
    return {
        "tvd2": round(tvd_2way(real, synth, cards), 6),
        "tvd3": round(tvd_3way(real, synth, cards, rng=np.random.default_rng(trial.seed)), 6),
        "shd": None
        if parents is None
        else structural_hamming_distance(parents, trial.made.truth.parents),
        "accuracy": round(naive_bayes_accuracy(synth, held_out, cards, target), 6),
        "seconds": round(seconds, 3),
        "bytes": released.sent,
        "edges": None if parents is None else sum(len(ps) for ps in parents.values()),
    }


def _check_epsilons(settings: DpSettings, made: MadeDataset) -> None:
    """Refuse, before any run, an epsilon the DP job's plan cannot hold."""
    from ppbn.dp.accounting import plan
    from ppbn.protocols.fixedpoint import SCORE_FRAC

    cards = [v.cardinality for v in made.schema.variables]
    for eps in settings.epsilons:
        try:
            plan(
                eps,
                n_records=settings.records,
                cardinalities=cards,
                max_parents=settings.max_parents,
                mode=settings.score,
                score_frac=SCORE_FRAC,
            )
        except ValueError as exc:
            raise UserError(f"--epsilons {eps:g}: {exc}") from None
