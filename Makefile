# Two commands set up and exercise pptmc on a fresh Debian machine: `make demo` and `make test`.
# Both run the idempotent `setup` step first (apt packages + .venv); a second run does nothing noticeable.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PPTMC := $(VENV)/bin/pptmc
STAMP := $(VENV)/.installed
APT_PACKAGES := clang-19 llvm-19 libomp-19-dev libzstd-dev
DEMO_DIR ?= results/demo
DEMO_SIZE ?= MINI

.PHONY: setup system-deps venv test demo bench clean doctor

setup: system-deps venv

# apt only when something is missing, so the second run costs one dpkg query.
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
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

test: setup
	bash .ci/pytest.sh

demo: setup
	$(PPTMC) doctor
	$(PPTMC) suite --size $(DEMO_SIZE) --validate -o $(DEMO_DIR)

bench: setup
	$(PY) -m benchmarks.run_all

doctor: setup
	$(PPTMC) doctor

clean:
	rm -rf $(VENV) build *.egg-info results .pytest_cache
