# The two commands of the README: `make run` (noti for real, with a demo) and `make test`.
PYTHON ?= python3
VENV   ?= .venv

.PHONY: run test bench chaos venv clean-var

run:
	@scripts/run.sh

test:
	@scripts/test.sh

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
