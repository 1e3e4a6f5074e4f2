"""Pre-filling a plain Celery queue fast: Celery renders one message, the rest are copies.

Publishing 20,000 tasks one by one through Celery costs ~12 s here, which would dominate a
drain benchmark's wall time without being part of what it measures. So one message is
published for real, taken back, and replayed with fresh task ids, delivery tags and
arguments, LPUSHed in pipelined chunks: the worker receives what ``apply_async`` would have sent
(the sample is taken from a scratch queue and its routing set to the real one).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from typing import Any

import redis

__all__ = ["fill"]

CHUNK = 1000


def _copy(sample: dict[str, Any], args: Sequence[Any]) -> str:
    task_id = str(uuid.uuid4())
    body = json.loads(base64.b64decode(sample["body"]))
    body[0] = list(args)
    headers = {**sample["headers"], "id": task_id, "root_id": task_id, "argsrepr": repr(tuple(args))}
    properties = {
        **sample["properties"],
        "correlation_id": task_id,
        "delivery_tag": str(uuid.uuid4()),
    }
    envelope = {
        **sample,
        "body": base64.b64encode(json.dumps(body).encode()).decode(),
        "headers": headers,
        "properties": properties,
    }
    return json.dumps(envelope)


def fill(task: Any, args_list: Sequence[Sequence[Any]], queue: str = "celery", **options: Any) -> int:
    """Queue one ``task`` message per item of ``args_list`` on ``queue``, as
    ``task.apply_async(args, **options)`` would (``countdown`` included: every copy carries the
    sample's ETA); how many were queued. The sample goes through a scratch queue, so a worker
    may already be consuming ``queue``."""
    if not args_list:
        return 0
    scratch = f"{queue}.bench-sample"
    client = redis.Redis.from_url(task.app.conf.broker_url)
    try:
        task.apply_async(args=list(args_list[0]), queue=scratch, **options)
        raw = client.rpop(scratch)
        if not isinstance(raw, bytes):
            raise RuntimeError(f"the sample message did not land on {scratch!r}")
        client.delete(f"_kombu.binding.{scratch}", f"_kombu.binding_permanent.{scratch}")
        sample = json.loads(raw)
        sample["properties"]["delivery_info"] = {"exchange": "", "routing_key": queue}
        pipe = client.pipeline(transaction=False)
        for args in args_list:
            pipe.lpush(queue, _copy(sample, args))
            if len(pipe) >= CHUNK:
                pipe.execute()
        pipe.execute()
        return len(args_list)
    finally:
        client.close()
