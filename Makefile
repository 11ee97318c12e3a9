# First two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROTO_FILES := $(shell find protos -name '*.proto' | sort)

.PHONY: run test bench protos lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	mkdir -p run/hookserver.d run/state
	$(VENV)/bin/hookserver serve --standalone --config deploy/standalone.yaml

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: $(STAMP)
	$(PY) -m tests.bench

protos: $(STAMP)
	$(PY) -m grpc_tools.protoc -I protos --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_FILES)

typecheck: $(STAMP)
	$(PY) -m mypy

lint: $(STAMP)
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) run .pytest_cache .mypy_cache
