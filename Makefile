# prefstream developer entry points. A fresh machine needs only:  make demo   and   make test
#
# Two virtualenvs (deploy/venv.sh): the dependencies, cached outside the clone and shared by every
# clone (deploy/venv.sh --deps prints its path):
#   ${PREFSTREAM_CACHE:-~/.cache/prefstream}/venv-<sha256(requirements.txt)[:16]>
# and this clone's thin venv over it, <clone>/.prefstream-venv (deploy/venv.sh prints its path),
# whose python and `prefstream` run THIS checkout's code even when other clones share the cache.
# Kafka jars and data are cached under ${PREFSTREAM_CACHE:-~/.cache/prefstream}/kafka/<version>/.
# Override the interpreter with  make test PY=/path/to/python  (must have requirements.txt installed
# and import this checkout, e.g. PYTHONPATH=$PWD).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := $(shell deploy/venv.sh)
PY ?= $(VENV)/bin/python
PREFSTREAM ?= $(dir $(PY))prefstream
OMP_NUM_THREADS ?= 2
PYTEST_ARGS ?=

.PHONY: help venv broker-start broker-stop broker-status broker-reset registry-start registry-stop registry-status \
        topics test demo bench lint \
        prometheus-start prometheus-stop

help:
	@echo "make test            run the test suite (creates the venv, starts the Kafka broker if needed)"
	@echo "make demo            replay a bundled real data set through learner + explainer workers"
	@echo "make bench           run every bench/*.py with its defaults"
	@echo "make venv            create/reuse the cached dependency venv and this clone's venv ($(VENV))"
	@echo "make broker-start | broker-stop | broker-status | broker-reset   local Kafka 4 broker (127.0.0.1:9092)"
	@echo "make registry-start | registry-stop | registry-status   local schema registry (Apicurio, Confluent API at 127.0.0.1:8081/apis/ccompat/v7)"
	@echo "make topics          create the standard prefstream.* topics"
	@echo "make prometheus-start | prometheus-stop   local Prometheus scraping the workers (127.0.0.1:9090)"
	@echo "make lint            byte-compile the packages and syntax-check the shell scripts"

venv:
	@deploy/venv.sh --ensure >/dev/null

broker-start:
	@deploy/kafka/start.sh

broker-stop:
	@deploy/kafka/stop.sh

broker-status:
	@deploy/kafka/status.sh

broker-reset:
	@deploy/kafka/stop.sh
	@deploy/kafka/start.sh --fresh

registry-start:
	@deploy/registry/start.sh

registry-stop:
	@deploy/registry/stop.sh

registry-status:
	@deploy/registry/status.sh

topics: venv
	@deploy/with-broker.sh $(PY) -c "from stream.broker import create_topics, kafka_client_options as o; print(create_topics(None, client_options=o()))"

test: venv
	@deploy/with-broker.sh env OMP_NUM_THREADS=$(OMP_NUM_THREADS) MKL_NUM_THREADS=$(OMP_NUM_THREADS) \
		$(PY) -m pytest -q $(PYTEST_ARGS)

demo: venv
	@deploy/with-broker.sh env OMP_NUM_THREADS=$(OMP_NUM_THREADS) MKL_NUM_THREADS=$(OMP_NUM_THREADS) \
		$(PREFSTREAM) demo

bench: venv
	@deploy/with-broker.sh bash -c 'set -e; for f in bench/*.py; do echo "== $$f"; \
		OMP_NUM_THREADS=$(OMP_NUM_THREADS) MKL_NUM_THREADS=$(OMP_NUM_THREADS) $(PY) "$$f"; done'

lint: venv
	@$(PY) -m compileall -q stream learners explainers tests bench
	@for f in .ci/run deploy/*.sh deploy/kafka/*.sh deploy/registry/*.sh deploy/prometheus/*.sh; do bash -n "$$f" || exit 1; done
	@echo "lint ok"

prometheus-start:
	@deploy/prometheus/start.sh

prometheus-stop:
	@deploy/prometheus/stop.sh
