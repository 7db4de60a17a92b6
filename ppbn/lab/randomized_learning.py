"""``ppbn perturb learn``: read a randomized table, learn from it, report.

The data miner's side of the perturbation path: it receives records already randomized
by their owners and the public mechanism, and learns naive Bayes (Zhan), ID3, the pocket
perceptron or association rules (Ma 2006, Ch. 6-7) with ``ppbn.randomized.perturb``.

Tables: a CSV (one column per variable, an optional id column) or a folder written by
``ppbn datasets make`` (schema.json, alice.csv, bob.csv, joined on the record id). A
CSV's domains are the sorted values seen in the training and test files (numbers in
numeric order); a folder's come from its schema. The mechanism is given as flags (Warner
theta, M-category p, groups) or the shared mechanism file; with ``randomize_seed`` the
table holds original records and is randomized here first, which experiments and
demonstrations need and a real data miner never does.

``learn_files`` is the command's whole work (files in, report and output folder out);
``report_lines`` says the report in text for people.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.bn.schema import Schema
from ppbn.data.outputs import atomic_output_dir, check_output_dir
from ppbn.data.party_data import load_joined_with_bins, read_csv_cells
from ppbn.data.perturb_files import read_mechanisms
from ppbn.errors import DataError, UserError
from ppbn.randomized.perturb.disguised_accuracy import TooManyPasses, disguised_accuracy
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.learners import (
    ITEM_STATES,
    LEARNERS,
    fit_learner,
    item_codes,
    model_dict,
)
from ppbn.randomized.perturb.mechanisms import Mechanisms
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomizationScheme, RandomSource
from ppbn.randomized.pram.privacy import gamma_amplification


@dataclass(frozen=True)
class Table:
    """Coded records with their column names and the state names of every column."""

    columns: tuple[str, ...]
    codes: np.ndarray
    states: dict[str, tuple[str, ...]]

    def cardinalities(self) -> list[int]:
        return [len(self.states[c]) for c in self.columns]


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _read_frame(path: Path, id_column: str | None):
    frame = read_csv_cells(path)
    if id_column is not None:
        if id_column not in frame.columns:
            raise DataError(f"{path}: line 1: id column {id_column!r} is missing")
        frame = frame.drop(columns=[id_column])
    for name in frame.columns:
        empty = np.flatnonzero(frame[name].to_numpy(dtype=str) == "")
        if empty.size:
            raise DataError(f"{path}: line {empty[0] + 2}: column {name!r} is empty")
    return frame


def load_tables(
    paths: Sequence[Path], id_column: str | None = None, fixed: FileMechanism | None = None
) -> list[Table]:
    """Load the training table and optional test tables on common domains; the columns a
    mechanism file ``fixed`` declares take its states, in its order."""
    if paths[0].is_dir():
        tables = [_load_folder(p) for p in paths]
        if fixed is not None:
            fixed.check_states(paths[0], tables[0])
        return tables
    frames = [_read_frame(p, id_column) for p in paths]
    columns = tuple(str(c) for c in frames[0].columns)
    for path, frame in zip(paths[1:], frames[1:], strict=True):
        if tuple(frame.columns) != columns:
            raise DataError(f"{path}: line 1: columns differ from {paths[0]}'s")
    declared = fixed.mechanisms.states if fixed is not None else {}
    states = {
        c: declared[c]
        if c in declared
        else tuple(sorted({v for f in frames for v in f[c].to_numpy(dtype=str)}, key=_sort_key))
        for c in columns
    }
    tables = []
    for path, frame in zip(paths, frames, strict=True):
        codes = np.empty((len(frame), len(columns)), dtype=np.int64)
        for j, c in enumerate(columns):
            coded = frame[c].map({s: k for k, s in enumerate(states[c])})
            unknown = np.flatnonzero(coded.isna().to_numpy())
            if unknown.size:
                row = int(unknown[0])
                raise DataError(
                    f"{path}: line {row + 2}, column {c!r}: value {frame[c].iloc[row]!r} is not a state "
                    f"{fixed.path if fixed else 'the table'} declares ({', '.join(states[c])})"
                )
            codes[:, j] = coded.to_numpy(dtype=np.int64)
        tables.append(Table(columns, codes, states))
    return tables


def _load_folder(folder: Path) -> Table:
    schema_path = folder / "schema.json"
    if not schema_path.is_file():
        raise DataError(
            f"{folder}: not a data folder (no schema.json); give a CSV or a `ppbn datasets make` folder"
        )
    schema = Schema.load(str(schema_path))
    names, codes, bins = load_joined_with_bins(schema, folder / "alice.csv", folder / "bob.csv")
    return Table(tuple(names), codes, schema.state_names(bins))


def parse_groups(text: str | None, candidates: Sequence[str]) -> list[tuple[str, ...]]:
    """``a,b:c,d`` -> [(a, b), (c, d)]; ``all`` -> one group of every candidate column."""
    if not text:
        return []
    if text.strip() == "all":
        return [tuple(candidates)]
    groups = []
    for part in text.split(":"):
        members = tuple(m.strip() for m in part.split(",") if m.strip())
        if not members:
            raise UserError(f"--groups {text!r}: an empty group (use a,b:c,d)")
        groups.append(members)
    return groups


@dataclass(frozen=True)
class Mechanism:
    """The command-line mechanism: Warner theta or M-category p, groups, what is randomized."""

    theta: float | None
    p: float | None
    groups: tuple[tuple[str, ...], ...]
    randomized: tuple[str, ...]

    def scheme(self, table: Table) -> RandomizationScheme:
        cards = {c: len(table.states[c]) for c in table.columns}
        return scheme_for(cards, self.randomized, theta=self.theta, p=self.p, groups=self.groups)

    def describe(self, class_name: str | None) -> str:
        kind = (
            f"randomized response theta = {self.theta:g}"
            if self.theta is not None
            else f"M-category p = {self.p:g}"
        )
        groups = "; groups " + ", ".join("+".join(g) for g in self.groups) if self.groups else ""
        grouped = {v for g in self.groups for v in g}
        kept = (
            ""
            if class_name is None or class_name in self.randomized or class_name in grouped
            else "; class not randomized"
        )
        return kind + groups + kept


@dataclass(frozen=True)
class FileMechanism:
    """The shared mechanism file (``ppbn perturb randomize --mechanism``, format in
    ``ppbn.randomized.perturb.mechanisms``): its states order a column's codes and its blocks
    are the scheme, so the learner corrects for exactly what the owners applied."""

    path: str
    mechanisms: Mechanisms

    @classmethod
    def read(cls, path: str) -> FileMechanism:
        return cls(path, read_mechanisms(path))

    def check_states(self, folder: Path, table: Table) -> None:
        """A data folder's states come from its schema: they must be the file's."""
        for column, states in self.mechanisms.states.items():
            if column in table.states and tuple(table.states[column]) != tuple(states):
                raise DataError(
                    f"{self.path}: columns.{column}.states {list(states)} differ from {folder}'s "
                    f"schema ({list(table.states[column])})"
                )

    def scheme(self, table: Table) -> RandomizationScheme:
        for column in table.columns:
            if column in self.mechanisms.noise:
                raise UserError(
                    f"{self.path}: column {column!r} has additive noise; these learners take categorical "
                    "columns (reconstruct it with `ppbn perturb reconstruct`, or leave it out of the table)"
                )
        blocks = [b for b in self.mechanisms.scheme.blocks if set(b.variables) & set(table.columns)]
        for block in blocks:
            absent = [v for v in block.variables if v not in table.columns]
            if absent:
                raise UserError(
                    f"{self.path}: group {block.name} is randomized together, but the table has no {absent[0]!r}"
                )
        return RandomizationScheme({c: len(table.states[c]) for c in table.columns}, blocks)

    def describe(self, class_name: str | None) -> str:
        blocks = "; ".join(
            f"{b.name}: {b.label}" for b in self.mechanisms.scheme.blocks if not b.is_identity
        )
        return f"mechanism file {self.path} ({blocks or 'nothing randomized'})"


def privacy(scheme: RandomizationScheme) -> list[dict[str, Any]]:
    """gamma-amplification of each block (docs/conventions.md, "Gamma amplification": strict value and nonzero-only value)."""
    out = []
    for block in scheme.blocks:
        gamma = gamma_amplification(block.matrix, block.name)
        out.append(
            {
                "variables": list(block.variables),
                "gamma": gamma.value if np.isfinite(gamma.value) else "inf",
                "gamma_ignoring_zeros": gamma.value_ignoring_zeros
                if np.isfinite(gamma.value_ignoring_zeros)
                else "inf",
            }
        )
    return out


def learn(
    learner: str,
    train: Table,
    test: Table | None,
    class_name: str | None,
    mechanism: Mechanism | FileMechanism | None,
    options: Mapping[str, Any],
    randomize_seed: str | None = None,
    correct: bool = True,
    test_randomized: bool = False,
) -> dict[str, Any]:
    """Fit one learner on ``train`` (randomized by ``mechanism``) and report the model and
    its accuracy on ``test`` (original records; with ``test_randomized``, records randomized
    by the same mechanism, whose accuracy is estimated as in Zhan Sec. 3.5). Without
    ``mechanism``, or with ``correct`` false, the learner takes the records as if they were
    original (the uncorrected baseline)."""
    if test_randomized and (mechanism is None or not correct):
        raise UserError(
            "--test-randomized needs the mechanism the test records were randomized with"
        )
    if learner not in LEARNERS:
        raise UserError(f"unknown learner {learner!r}; use one of {', '.join(LEARNERS)}")
    if learner == "rules":
        train = Table(
            train.columns,
            item_codes(train.columns, train.codes, train.states),
            dict.fromkeys(train.columns, ITEM_STATES),
        )
    elif class_name is None or class_name not in train.columns:
        raise UserError(
            f"--class {class_name!r}: not a column of the data ({', '.join(train.columns)})"
        )
    plain = RandomizationScheme({c: len(train.states[c]) for c in train.columns})
    scheme = mechanism.scheme(train) if mechanism is not None else plain
    codes = train.codes
    if randomize_seed is not None:
        if mechanism is None:
            raise UserError("--randomize needs a mechanism (--theta, --p or --mechanism)")
        codes = scheme.randomize(codes, train.columns, RandomSource.from_seed(randomize_seed))
    data = RandomizedData(train.columns, codes, scheme if correct else plain)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "learner": learner,
        "records": data.records,
        "mechanism": mechanism.describe(class_name) if mechanism else "none",
        "corrected": bool(mechanism and correct),
        "randomized_here": randomize_seed is not None,
        "privacy": privacy(scheme),
    }
    model = fit_learner(learner, data, class_name, options, train.states)
    report["seconds"] = time.perf_counter() - started
    if learner != "rules":
        report["class"] = class_name
    report["model"] = model_dict(model, train.states)
    if learner == "rules":
        return report
    if learner == "id3":
        report["tree_lines"] = model.lines(train.states)
    if test is not None:
        if test.columns != train.columns:
            raise DataError("the test table's columns differ from the training table's")
        report.update(
            _test_report(model, learner, test, class_name, scheme, test_randomized, randomize_seed)
        )
        if learner == "perceptron":
            report["accuracy_task"] = (
                f"{class_name} = {train.states[class_name][model.positive]} vs the rest"
            )
    return report


def _test_report(
    model,
    learner: str,
    test: Table,
    class_name: str,
    scheme: RandomizationScheme,
    test_randomized: bool,
    randomize_seed: str | None,
) -> dict[str, Any]:
    """The accuracy on original test records, or its estimate from disguised ones (Zhan Sec.
    3.5); with ``randomize_seed``, the original test records are also randomized here and the
    estimate is reported next to the true accuracy, which shows how well it tracks it (or,
    when it would take too many classifier passes, skipped with the reason)."""
    cards = test.cardinalities()
    class_column = test.columns.index(class_name)

    def correct(records: np.ndarray) -> np.ndarray:
        predicted = model.predict(RandomizedData.plain(test.columns, records, cards))
        truth = records[:, class_column]
        return predicted == (truth == model.positive if learner == "perceptron" else truth)

    out: dict[str, Any] = {"test_records": int(test.codes.shape[0])}
    disguised = test.codes if test_randomized else None
    if not test_randomized:
        out["accuracy"] = float(np.mean(correct(test.codes)))
        if randomize_seed is not None and scheme.blocks:
            source = RandomSource.from_seed(randomize_seed).derive("test")
            disguised = scheme.randomize(test.codes, test.columns, source)
    if disguised is not None:
        try:
            estimate = disguised_accuracy(correct, disguised, test.columns, scheme)
        except TooManyPasses as exc:
            if test_randomized:  # the estimate is the only accuracy there is
                raise
            out["accuracy_estimated_skipped"] = str(exc)  # an extra beside the true accuracy
            return out
        out["accuracy_estimated"] = estimate.estimate
        out["accuracy_estimated_se"] = estimate.standard_error
        out["accuracy_estimated_passes"] = estimate.candidates
    return out


@dataclass(frozen=True)
class LearnRequest:
    """One ``ppbn perturb learn``: the files, the mechanism (a mechanism file, or Warner
    ``theta`` / M-category ``p`` with ``groups`` as ``parse_groups`` reads them) and the
    learner's ``options`` (the names of ``fit_learner``)."""

    learner: str
    data: str
    options: Mapping[str, Any] = field(default_factory=dict)
    class_name: str | None = None
    test: str | None = None
    test_randomized: bool = False
    id_column: str | None = None
    mechanism_file: str | None = None
    theta: float | None = None
    p: float | None = None
    groups: str | None = None
    randomize_class: bool = False
    ignore_randomization: bool = False
    randomize_seed: str | None = None
    out: str | None = None
    force: bool = False


def learn_files(request: LearnRequest) -> dict[str, Any]:
    """Load the tables, settle the mechanism, learn, and write model.json and report.json
    to ``request.out`` if given; the report."""
    if request.out:
        check_output_dir(request.out, force=request.force)
    if request.test_randomized and not request.test:
        raise UserError(
            "--test-randomized says how the --test records were randomized: give --test"
        )
    paths = [Path(request.data)] + ([Path(request.test)] if request.test else [])
    if request.test and Path(request.test).is_dir() != Path(request.data).is_dir():
        raise UserError("--data and --test must both be CSV files or both be data folders")
    file_mechanism = None
    if request.mechanism_file is not None:
        flags = [
            f
            for f, given in (
                ("--theta", request.theta is not None),
                ("--p", request.p is not None),
                ("--groups", bool(request.groups)),
                ("--randomize-class", request.randomize_class),
            )
            if given
        ]
        if flags:
            raise UserError(f"--mechanism describes the whole mechanism: leave out {flags[0]}")
        file_mechanism = FileMechanism.read(request.mechanism_file)
    tables = load_tables(paths, request.id_column, file_mechanism)
    train = tables[0]
    test = tables[1] if len(tables) > 1 else None
    mechanism = _mechanism(request, train, file_mechanism)
    report = learn(
        request.learner,
        train,
        test,
        request.class_name,
        mechanism,
        request.options,
        request.randomize_seed,
        correct=not request.ignore_randomization,
        test_randomized=request.test_randomized,
    )
    report["data"] = str(request.data)
    if request.out:
        with atomic_output_dir(request.out, force=request.force) as folder:
            (folder / "model.json").write_text(
                json.dumps(report["model"], indent=2) + "\n", encoding="utf-8"
            )
            (folder / "report.json").write_text(
                json.dumps(report, indent=2) + "\n", encoding="utf-8"
            )
    return report


def _mechanism(
    request: LearnRequest, train: Table, file_mechanism: FileMechanism | None
) -> Mechanism | FileMechanism | None:
    """The mechanism the request names (None: learn as if the data were original)."""
    if file_mechanism is None and request.theta is None and request.p is None:
        if not request.ignore_randomization:
            raise UserError(
                "name the mechanism the data were randomized with (--theta, --p or --mechanism), "
                "or --ignore-randomization to learn as if they were not"
            )
        return None
    if request.ignore_randomization and request.randomize_seed is None:
        raise UserError(
            "--ignore-randomization learns as if the data were original: give no "
            "mechanism (or --randomize, to randomize here and then ignore it)"
        )
    if request.theta is not None and request.p is not None:
        raise UserError("give one mechanism: --theta (randomized response) or --p (PRAM)")
    if file_mechanism is not None:
        return file_mechanism
    candidates = [c for c in train.columns if c != request.class_name]
    randomized = [*candidates, request.class_name] if request.randomize_class else candidates
    return Mechanism(
        request.theta,
        request.p,
        tuple(parse_groups(request.groups, candidates)),
        tuple(randomized),
    )


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report for people: the mechanism, the model in short, the accuracy."""
    how = "estimated counts" if report["corrected"] else "taken as if not randomized"
    out = [
        f"{report['learner']} on {report['records']:,} records ({how}); mechanism: {report['mechanism']}"
    ]
    gammas = sorted({_gamma_text(g) for g in report["privacy"]})
    if gammas:
        out.append(f"gamma-amplification per randomized block: {', '.join(gammas)}")
    model = report["model"]
    if report["learner"] == "nb":
        out.append(
            "P("
            + model["class"]
            + "): "
            + ", ".join(f"{k} {v:.3f}" for k, v in model["prior"].items())
        )
        classes = " / ".join(model["prior"])
        for name, table in model["conditionals"].items():
            cells = "; ".join(
                f"{state}: " + " / ".join(f"{p:.3f}" for p in row.values())
                for state, row in table.items()
            )
            out.append(f"P({name} | {model['class']} = {classes}) {cells}")
    elif report["learner"] == "id3":
        out.append(f"tree: {model['nodes']} nodes, depth {model['depth']}")
        out += ["  " + line for line in report["tree_lines"]]
    elif report["learner"] == "perceptron":
        out.append(
            f"w ({model['encoding']}, positive = {model['positive']}): "
            + ", ".join(f"{k} {v:g}" for k, v in model["weights"].items())
        )
        out.append(
            f"pocket weights classify {model['training_correct']:.3f} of the training weight right"
        )
    else:
        sets, rules = model["frequent_itemsets"], model["rules"]
        out.append(f"{len(sets)} frequent itemsets, {len(rules)} rules")
        for rule in rules[:15]:
            out.append(
                f"  {', '.join(rule['if'])} => {', '.join(rule['then'])}  "
                f"support {rule['support']:.3f} confidence {rule['confidence']:.3f}"
            )
        if len(rules) > 15:
            out.append(f"  ... {len(rules) - 15} more (--format json or --out for all)")
    task = f" ({report['accuracy_task']})" if "accuracy_task" in report else ""
    if "accuracy" in report:
        out.append(
            f"accuracy on {report['test_records']:,} test records{task}: {report['accuracy']:.4f}"
        )
    if "accuracy_estimated" in report:
        which = "the disguised" if "accuracy" not in report else "a copy randomized here of the"
        out.append(
            f"accuracy estimated from {which} test records (Zhan Sec. 3.5, "
            f"{report['accuracy_estimated_passes']} classifier passes){task}: "
            f"{report['accuracy_estimated']:.4f} +- {report['accuracy_estimated_se']:.4f} (standard error)"
        )
    if "accuracy_estimated_skipped" in report:
        out.append(
            f"note: no estimate from a copy of the test records randomized here: "
            f"{report['accuracy_estimated_skipped']}"
        )
    out.append(f"learned in {report['seconds']:.2f} s")
    return out


def _gamma_text(row: dict[str, Any]) -> str:
    if row["gamma"] != "inf":
        return f"{row['gamma']:.3g}"
    loose = row["gamma_ignoring_zeros"]
    return "inf" if loose == "inf" else f"inf ({loose:.3g} ignoring zeros)"
