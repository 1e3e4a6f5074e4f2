"""The HTTP API against its own OpenAPI schema, by a property-based API tester (schemathesis)
through a real ``noti serve``: for every operation, a bounded number of generated requests
that fit the schema and of requests that do not. No answer is a 5xx, every answer conforms to
the schema (status, content type, headers, body), requests that break the schema are refused
with a 4xx, the token is really checked (the same request without it is refused), and a
refused request stores nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from tests.conftest import ADMIN, ALICE
from tests.servers import ApiProcess
from tests.test_hostile_input import snapshot

schemathesis = pytest.importorskip("schemathesis")

#: Generated requests per operation and mode (positive, negative): the run stays well
#: under a minute on the 2-core machine.
EXAMPLES = 30


def test_every_operation_conforms_to_the_schema_and_refuses_bad_input(
    api: ApiProcess, rt: Any, redis_url: str
) -> None:
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        ignored_auth,
        negative_data_rejection,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        negative_data_rejection,
        ignored_auth,
    ]
    plain, _ = rt.tokens.add(ALICE, acting=ADMIN)
    headers = {"Authorization": f"Bearer {plain}"}
    raw = redis.Redis.from_url(redis_url)
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    # the generator leaves the token out (each request carries a valid one, so a request it
    # broke is broken in its parameters or body); ignored_auth sends each without it
    schema.config.generation.update(with_security_parameters=False)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    seen: dict[str, set[int]] = {}

    def stored() -> dict[str, str]:
        return snapshot(raw, leave_out=lambda key: key.startswith("noti:token:"))

    def run(operation: Any, mode: Any) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            before = stored()
            response = case.call(base_url=api.url, headers=headers, timeout=10)
            seen.setdefault(operation.label, set()).add(response.status_code)
            assert response.status_code < 500, (case.as_curl_command(), response.text)
            if response.status_code == 431:
                # a request line over NOTI_HTTP_HEADER_MAX_BYTES (the search's four texts of up to
                # 2,048 characters, percent-encoded, can make one): refused by the protocol layer
                # before any route, as documented; schemathesis counts only its own list as refusals
                assert response.json()["error"]["code"] == "e.noti.http.headers", response.text
                assert stored() == before
                return
            case.validate_response(response, checks=checks, headers=headers)
            if 400 <= response.status_code < 500:
                assert stored() == before, (case.as_curl_command(), response.text)

        check()

    try:
        for operation in operations:
            run(operation, GenerationMode.POSITIVE)
            try:
                run(operation, GenerationMode.NEGATIVE)
            except Unsatisfiable:  # nothing to break: no body, and parameters any string fits
                assert not operation.body, operation.label
    finally:
        raw.close()
    # the run reached the routes, not only the token check and the body parser
    statuses: Callable[[str], set[int]] = lambda label: seen.get(label, set())  # noqa: E731
    assert {201, 422} <= statuses("POST /v1/notifications"), seen
    assert 200 in statuses("GET /v1/notifications"), seen
    assert 200 in statuses("GET /v1/health"), seen
