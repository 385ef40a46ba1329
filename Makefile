# Two commands set up and exercise pptmc on a fresh Debian machine: `make demo` and `make test`.
# Both run the idempotent `setup` step first (apt packages + .venv); a second run does nothing noticeable.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PPTMC := $(VENV)/bin/pptmc
STAMP := $(VENV)/.installed
APT_PACKAGES := clang-19 llvm-19 libomp-19-dev libzstd-dev
BENCH_APT_PACKAGES := valgrind  # cachegrind, the baseline `make bench` compares `pptmc run` with
DEMO_DIR ?= results/demo
DEMO_SIZE ?= MINI

WARM_STAMP := $(VENV)/.warm

.PHONY: setup system-deps apt-install venv warm test demo bench clean doctor

setup: system-deps venv warm

# apt only when something is missing, so the second run costs one dpkg query.
system-deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

# apt-install PACKAGES="a b": install those that are missing (one dpkg query each when none is).
apt-install:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

# numba compiles its kernels on first use (about 2 minutes); one small pipeline run fills its on-disk
# cache, so a newcomer's first command takes seconds. Redone only when the analysis code changes.
warm: $(WARM_STAMP)

$(WARM_STAMP): $(STAMP) $(shell find analysis instrument -name '*.py' 2>/dev/null)
	@echo "warming numba's compile cache (once, about 2 minutes)"
	@$(PPTMC) suite --size MINI --benchmarks atax --machines haswell-i7-5960x --cores 1,2,4,8,16 \
	  -o $(VENV)/warmup > $(VENV)/warmup.log 2>&1 || { tail -20 $(VENV)/warmup.log; exit 1; }
	@touch $@

test: setup
	bash .ci/pytest.sh

demo: setup
	$(PPTMC) doctor
	$(PPTMC) suite --size $(DEMO_SIZE) --validate -o $(DEMO_DIR)

bench: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(BENCH_APT_PACKAGES)"
	$(PY) -m benchmarks.run_all

doctor: setup
	$(PPTMC) doctor

clean:
	rm -rf $(VENV) build *.egg-info results .pytest_cache
