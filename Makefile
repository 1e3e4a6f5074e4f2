# The commands of the README: `make run` (noti for real, with a demo), `make test` (everything, on
# the newest and the lowest versions) and `make test-fast` (the tests not marked slow: the edit loop).
PYTHON ?= python3
VENV   ?= .venv

.PHONY: run test test-fast docs bench chaos venv clean-var

run:
	@scripts/run.sh

test:
	@scripts/test.sh

# pytest options in ARGS, e.g. `make test-fast ARGS="-k priority -x"`
test-fast:
	@NOTI_TEST_FAST=1 scripts/test.sh $(ARGS)

# The documentation site (mkdocs.yml, docs/; references generated from the code by docsgen/):
# into ./site, warnings are errors. `make docs DOCS_ARGS=serve` serves it on 127.0.0.1:8000.
DOCS_ARGS ?= build --strict
docs:
	@NOTI_EXTRAS=docs scripts/venv.sh
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs $(DOCS_ARGS)

# Every benchmark scenario against plain Celery in the same run, one table (bench/__main__.py).
# BENCH_ARGS="--smoke" for tiny sizes; "--reps 1 --only 3,5" etc.
bench:
	@NOTI_EXTRAS=test,bench scripts/venv.sh
	.venv/bin/python -m bench $(BENCH_ARGS)

# Notifications through 4 workers and beat while workers and Redis are killed; reconciles every id
# (chaos/__init__.py). About 4 minutes on 2 cores: Redis with appendfsync everysec, then always.
# CHAOS_ARGS="--short" (1,000 notifications), "--fsync always", "--seed 7", "--n 20000".
chaos:
	@NOTI_EXTRAS=test scripts/venv.sh
	.venv/bin/python -m chaos $(CHAOS_ARGS)

venv:
	@scripts/venv.sh

clean-var:
	rm -rf var
