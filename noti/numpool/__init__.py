"""Sender-number pools: numbers shared by many processes, taken and given back atomically.

::

    from noti.numpool import NumberPool

    pool = NumberPool("sms-cn")         # as NOTI_USER; or user="alice"
    pool.add("+8610690000001"); pool.register("+8610690000001")   # the first add makes it yours
    with pool.calling() as number:      # the number free the longest, busy until the block ends
        ...

See :mod:`noti.numpool.pool` for the state table and :mod:`noti.numpool.borrow` for providers.
"""

from __future__ import annotations

from noti.numpool.borrow import borrowed_sender
from noti.numpool.pool import (
    POOL_NAME_PATTERN,
    Event,
    NumberPool,
    NumberState,
    PoolClient,
    PoolSnapshot,
    PoolStats,
    Transition,
)

__all__ = [
    "POOL_NAME_PATTERN",
    "Event",
    "NumberPool",
    "NumberState",
    "PoolClient",
    "PoolSnapshot",
    "PoolStats",
    "Transition",
    "borrowed_sender",
]
