"""Job parameters that need another one are refused when the request gives them without it
(hill-climbing settings without search hc, dp_delta / dp_structure_share without
dp_epsilon), whatever their value, while a request that leaves them out passes and the
normalised form the peer checks passes too."""

from __future__ import annotations

import pytest

from ppbn.bn.constants import DEFAULT_TABU
from ppbn.bn.schema import Schema
from ppbn.dp.constants import DEFAULT_DELTA, DEFAULT_STRUCTURE_SHARE
from ppbn.jobs.base import ParameterError
from ppbn.jobs.learn import LEARN_JOB, check_learn_params
from ppbn.jobs.pram import check_pram_params
from ppbn.jobs.unused_params import refuse_unused

EDGES = [["asia", "tub"], ["smoke", "lung"]]


@pytest.fixture(scope="module")
def schema(asia_dir) -> Schema:
    return Schema.load(str(asia_dir / "schema.json"))


@pytest.mark.parametrize(
    ("given", "parameter", "needs"),
    [
        ({"white_list": EDGES}, "white_list", "search='hc'"),
        ({"search": "k2", "black_list": EDGES}, "black_list", "search='hc'"),
        ({"fixed_edges": EDGES[:1]}, "fixed_edges", "search='hc'"),
        ({"start": EDGES}, "start", "search='hc'"),
        ({"tabu": DEFAULT_TABU}, "tabu", "search='hc'"),  # the default, given: still unused
        ({"dp_delta": DEFAULT_DELTA}, "dp_delta", "dp_epsilon"),
        ({"dp_structure_share": DEFAULT_STRUCTURE_SHARE}, "dp_structure_share", "dp_epsilon"),
        ({"dp_epsilon": None, "dp_delta": 1e-7}, "dp_delta", "dp_epsilon"),
    ],
)
def test_the_learn_job_refuses_a_parameter_it_would_not_use(schema, given, parameter, needs):
    with pytest.raises(ParameterError, match=f"^learn: {parameter} needs {needs}") as err:
        check_learn_params(given, schema)
    assert err.value.parameter == parameter


def test_left_out_or_applying_parameters_pass_and_the_normal_form_checks_again(schema):
    exact = check_learn_params({}, schema)
    assert exact["tabu"] is None and exact["dp_delta"] is None
    assert exact["dp_structure_share"] is None
    assert check_learn_params(exact, schema) == exact  # the peer checks the normalised form
    assert LEARN_JOB.privacy_cost(exact) is None
    hc = check_learn_params({"search": "hc", "white_list": EDGES}, schema)
    assert (hc["tabu"], hc["white_list"]) == (DEFAULT_TABU, EDGES)
    assert check_learn_params(hc, schema) == hc
    dp = check_learn_params({"dp_epsilon": 1.0, "dp_delta": 1e-7}, schema)
    assert (dp["dp_delta"], dp["dp_structure_share"]) == (1e-7, DEFAULT_STRUCTURE_SHARE)
    assert check_learn_params(dp, schema) == dp
    assert LEARN_JOB.privacy_cost(dp).delta == 1e-7


def test_the_pram_jobs_refuse_hill_climbing_settings_under_k2(schema):
    with pytest.raises(ParameterError, match="^pram: white_list needs search='hc'"):
        check_pram_params({"p": 0.3, "white_list": EDGES}, schema)
    normal = check_pram_params({"p": 0.3}, schema)
    assert normal["tabu"] is None
    assert check_pram_params(normal, schema) == normal


def test_the_api_check_names_the_keyword():
    with pytest.raises(ParameterError, match=r"^white_list needs search='hc' \("):
        refuse_unused({"white_list": EDGES})
    with pytest.raises(ParameterError, match="^dp_structure_share needs dp_epsilon"):
        refuse_unused({"max_parents": 2, "dp_structure_share": 0.5})
    refuse_unused({"search": "hc", "tabu": 5, "dp_epsilon": 1.0, "dp_delta": 1e-7})
    refuse_unused({"white_list": None, "dp_delta": None})  # null: not given
