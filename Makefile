# The two commands of the README: `make run` (noti for real, with a demo) and `make test`.
PYTHON ?= python3
VENV   ?= .venv

.PHONY: run test bench venv clean-var

run:
	@scripts/run.sh

test:
	@scripts/test.sh

# Benchmarks against plain Celery in the same run; BENCH_ARGS=--smoke for tiny sizes.
bench:
	@NOTI_EXTRAS=test scripts/venv.sh
	.venv/bin/python -m bench.enqueue_bench $(BENCH_ARGS)
	.venv/bin/python -m bench.delay_bench $(BENCH_ARGS)
	.venv/bin/python -m bench.webman_bench $(BENCH_ARGS)

venv:
	@scripts/venv.sh

clean-var:
	rm -rf var
