# Two commands for a newcomer: `make demo` and `make test` (both set everything up first).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: install demo test test-producers dev lint format validate clean

# The package's bytecode is compiled as a non-editable install compiles it: every command starts
# from it even where PYTHONDONTWRITEBYTECODE is set (about half a second of CPU per command).
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q ol_dagster
	touch $@

install: $(BIN)/.installed

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

# The demo, then `ol-dagster check` against each fake catalog (OpenMetadata, Marquez, Blindata)
# served in process, when the checkout has the tests (the installed package never imports them).
demo: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/ol-dagster demo
	test ! -d ol_dagster_tests || $(BIN)/python -m ol_dagster_tests.check_against_fakes

# The settings-based tests run a second time with the store and the embedded catalog on PostgreSQL
# (the other tests already run on both databases). The tests start their own PostgreSQL server.
PG_PASS := ol_dagster_tests/dagster/test_end_to_end.py ol_dagster_tests/safety/test_cleanup_seed_example.py \
	ol_dagster_tests/dagster/test_failed_runs.py ol_dagster_tests/dagster/test_analysis_assets.py \
	ol_dagster_tests/dagster/test_retention.py ol_dagster_tests/dagster/test_lineage_assets.py \
	ol_dagster_tests/safety/test_fanout.py ol_dagster_tests/safety/test_ownership_cli.py \
	ol_dagster_tests/safety/test_ownership_scopes_cli.py ol_dagster_tests/safety/test_ownership_overlap_cli.py \
	ol_dagster_tests/safety/test_long_values_cli.py

# Both passes always run (a failure in the first still shows the PostgreSQL results); the target
# fails if either did.
test: install
	@first=0; second=0; \
	echo '$(BIN)/pytest -q -n 3 --durations=30'; \
	$(BIN)/pytest -q -n 3 --durations=30 || first=$$?; \
	echo 'OL_DAGSTER_TEST_DB=postgresql $(BIN)/pytest -q -n 3 $$(PG_PASS)'; \
	OL_DAGSTER_TEST_DB=postgresql $(BIN)/pytest -q -n 3 $(PG_PASS) || second=$$?; \
	if [ $$first -ne 0 ] || [ $$second -ne 0 ]; then \
		echo "make test failed: all tests exited $$first, the PostgreSQL pass exited $$second" >&2; \
		exit 1; \
	fi

# Real producers (dbt with openlineage-dbt, Airflow with its OpenLineage provider; each installed
# once into a venv of its own under .venv-producers/, or skipped with pip's reason) into the real
# receiver, and the change picture in Dagster's UI in headless Chromium (skipped without chromium).
# Minutes each, so not part of `make test`.
test-producers: install
	$(BIN)/pytest -q -n 2 -m producers --durations=10 ol_dagster_tests/producers

# Run from DAGSTER_HOME: `dagster dev` warns about a dagster.yaml in the folder it runs in that is not
# DAGSTER_HOME's (the checkout's is the template copied there). The settings are named absolutely.
# `dg dev`, which the notice filtered here recommends, needs a `dg` project and dagster-dg-cli.
dev: install $(DAGSTER_HOME)/dagster.yaml
	cd $(DAGSTER_HOME) && \
	OL_DAGSTER_SETTINGS=$(abspath $(or $(OL_DAGSTER_SETTINGS),ol_dagster.yaml)) \
	PYTHONWARNINGS='ignore:Function `dev_command` is superseded' \
	$(abspath $(BIN))/dagster dev -w $(CURDIR)/workspace.yaml $(DEV_ARGS)

validate: install
	$(BIN)/dagster definitions validate -w workspace.yaml

lint: install
	$(BIN)/ruff check ol_dagster ol_dagster_tests benchmarks
	$(BIN)/ruff format --check ol_dagster ol_dagster_tests benchmarks
	$(BIN)/pyright

format: install
	$(BIN)/ruff format ol_dagster ol_dagster_tests benchmarks
	$(BIN)/ruff check --fix ol_dagster ol_dagster_tests benchmarks

clean:
	rm -rf .ol_dagster .dagster_home
