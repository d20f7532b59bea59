# `make demo` and `make test` each set up .venv (reused when present) and run.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.labcoat-installed

.PHONY: setup demo test lint docs bench clean

$(PY):
	python3 -m venv $(VENV)

# torch first, pinned to the CPU wheel on this machine's disk: a bare `torch`
# requirement would otherwise pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,torch,postgres,ray,slurm,ui,hf,lightning,mlflow,tensorboard,wandb]"
	# Kronfluence and Captum (the inside extra) declare torch/torchvision ranges that would
	# replace the CPU wheel: without their dependencies, plus the two light ones they use
	$(PY) -m pip install -q --no-deps "kronfluence==1.0.1" "captum==0.9.0" "einconv==0.1.0" "opt_einsum==3.4.0"
	# MLflow (the import tests' reference client) apart: see the mlflow extra in pyproject.toml
	$(PY) -m pip install -q "mlflow>=3,<4" "torch==2.13.0"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/labcoat demo

# two workers (this machine's cores); a module's tests stay on one worker, so a module's
# shared fixture (a run it reads) is built once; the longest modules go first (tests/conftest.py).
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE, set in
# many Docker images): otherwise every trial and CLI subprocess compiles labcoat's own modules
# again and each worker rewrites every test module's asserts (tests/e2e + tinylm: 42 s -> 36 s).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2 --dist loadscope --no-loadscope-reorder

lint: setup
	$(VENV)/bin/ruff check src tests

# every benchmark's --quick (seconds each; peer tools that are absent are skipped), two at a
# time, through benchmarks/_harness.py; full runs: see benchmarks/README.md
bench: setup
	$(PY) benchmarks/_harness.py --jobs 2

# the manual (docs/, mkdocs.yml) into site/; strict: a broken link or page fails
docs: setup
	$(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .labcoat .pytest_cache site
