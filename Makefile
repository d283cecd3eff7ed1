# Every target does its own set-up: a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?= -n 2

.PHONY: install test demo bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall when the project metadata changes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench,plot,dask,interop]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m axesarray.demo

bench: $(STAMP)
	$(PY) benchmarks/run.py

lint: $(STAMP)
	$(PY) -m pip install --quiet ruff
	$(PY) -m ruff check axesarray tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
