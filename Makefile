# ppbn: the two commands a fresh machine needs are `make demo` and `make test`.
# Both create or refresh .venv and install the package with its dev extras (the install
# generates the gRPC stubs from ppbn/proto/*.proto: setup.py; the stubs rule below
# generates them again after a .proto changes) before doing their job.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ppbn-installed
PROTOS := $(wildcard ppbn/proto/*.proto)
STUBS := $(PROTOS:.proto=_pb2.py)

.PHONY: all install stubs demo test check-install lint docs clean fuzz

all: test

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) stubs

ppbn/proto/%_pb2.py: ppbn/proto/%.proto $(STAMP)
	$(PY) -m grpc_tools.protoc -Ippbn/proto=ppbn/proto --python_out=. --grpc_python_out=. --pyi_out=. $<

stubs: $(STUBS)

demo: install
	$(VENV)/bin/ppbn demo

lint: install
	$(PY) -m ruff check ppbn tests
	$(PY) -m ruff format --check ppbn tests

# Two pytest workers (the CI machine has 2 cores; most tests wait on daemons and sockets
# as much as they compute); one test file stays on one worker (its daemons and module
# fixtures are shared). `.venv/bin/pytest FILE` runs a single file serially.
# The Ray tests run afterwards on their own: a private Ray instance starting next to a busy
# pytest worker missed Ray's 30 s start-up window on a loaded CI host.
test: install lint
	$(PY) -m pytest -n 2 --dist loadfile -m 'not faults_full and not packaging_full and not ray'
	$(PY) -m pytest -m ray tests/lab/test_ray.py

# The wheel (python -m build, from the sdist) installed into a fresh virtual environment
# per extra, each loading the gRPC stubs; `make test` keeps the no-extra and bench ones.
# About five minutes on 2 cores; needs PyPI. -m '': every case, packaging_full included.
check-install: install
	$(PY) -m pytest tests/packaging -m ''

# The documentation site from docs/ (mkdocs.yml) into site/; --strict: a broken link or
# anchor fails the build. Not --quiet: it drops the warnings before --strict can count them,
# and the build passes whatever the links.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The long fuzz run: over 10,000 mutated messages at a live daemon; prints the tally.
fuzz: install
	PPBN_FUZZ=long $(PY) -m pytest tests/fuzz -q -p no:randomly -p no:cacheprovider --timeout=7200

clean:
	rm -rf $(VENV) build dist site *.egg-info ppbn/proto/*_pb2*.py ppbn/proto/*_pb2*.pyi
