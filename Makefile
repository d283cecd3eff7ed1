# Every target does its own set-up: a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?= -n 2

.PHONY: install test test-tiered demo bench lint docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall when the project metadata changes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench,plot,dask,interop,docs]"
	@# torch is large: a machine without room for it still runs the suite (its oracle tests skip).
	$(PY) -m pip install --quiet -e ".[torch]" || echo "torch could not be installed: its oracle tests will skip"
	touch $(STAMP)

install: $(STAMP)

# The suite runs twice: every file with tiered=False (the fused kernels answer), then the
# files whose tests compare results with numpy or an external oracle with the default
# tiered=True and the numpy tier answering every evaluation it takes (no compile starts:
# tests/conftest.py), so no test passes because of either tier.
TIERED_FILES := $(addprefix tests/test_,$(addsuffix .py,mathlib special_values expressions \
	reductions_table ops_table fused everyday idioms frictions softmax_passes normalize assign views \
	strided sizes layouts creation_layout autograd optim kinds interop bfloat16))

test: $(STAMP)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest $(PYTEST_ARGS)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest $(PYTEST_ARGS) --tiered $(TIERED_FILES)

# The second pass alone.
test-tiered: $(STAMP)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest $(PYTEST_ARGS) --tiered $(TIERED_FILES)

demo: $(STAMP)
	$(PY) -m axesarray.demo

bench: $(STAMP)
	$(PY) benchmarks/run.py

# The documentation site into site/ (mkdocs-material, API reference from the docstrings);
# any warning (a broken link, a missing reference) fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(PY) -m pip install --quiet ruff
	$(PY) -m ruff check axesarray tests benchmarks

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .hypothesis
