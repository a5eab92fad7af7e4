# gpuwatch: `make demo` sets up and starts the demo; `make test` runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEB_TEST_PACKAGES := prometheus victoria-metrics postgresql chromium chromium-driver
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck layers pytest system-deps venv clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "gpuwatch needs Python 3.11 or newer (found $$($(PYTHON) --version))" >&2; exit 1; }
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || $(MAKE) --no-print-directory deb PKGS=python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --constraint constraints.txt --editable '.[dev]'
	@touch $@

venv: $(STAMP)

## demo: install into .venv, build the simulated fleet, serve the dashboard on :8050
demo: $(STAMP)
	$(BIN)/gpuwatch demo

## deb: install Debian packages PKGS (as root, or through sudo)
deb:
	@missing=""; for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null \
			|| { echo "could not install:$$missing" >&2; exit 1; }; \
	fi

system-deps:
	@$(MAKE) --no-print-directory deb PKGS="$(DEB_TEST_PACKAGES)"
	@# kubectl builds the kustomization in the tests: Debian's kubernetes-client, unless a
	@# kubectl is already installed (another package may own /usr/bin/kubectl).
	@command -v kubectl >/dev/null || $(MAKE) --no-print-directory deb PKGS=kubernetes-client

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy bench

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP) system-deps
	$(BIN)/pytest $(PYTEST_ARGS)

## test: the whole suite (lint, types, layers, tests with real Prometheus/PostgreSQL/Chromium)
test: system-deps lint typecheck layers pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
