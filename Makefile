# The two commands of the README: `make run` (noti for real, with a demo) and `make test`.
PYTHON ?= python3
VENV   ?= .venv

.PHONY: run test venv clean-var

run:
	@scripts/run.sh

test:
	@scripts/test.sh

venv:
	@scripts/venv.sh

clean-var:
	rm -rf var
