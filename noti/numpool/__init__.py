"""Sender-number pools: numbers shared by many processes, taken and given back atomically.

::

    from noti.numpool import NumberPool

    pool = NumberPool("sms-cn")         # as NOTI_USER; or user="alice"
    pool.add("+8610690000001"); pool.register("+8610690000001")   # the first add makes it yours
    with pool.calling() as number:      # the number free the longest, busy until the block ends
        ...

See :mod:`noti.numpool.pool` for the state table and the handle on a pool,
:mod:`noti.numpool.states` for its model, :mod:`noti.numpool.script` for its Redis calls and
:mod:`noti.numpool.borrow` for providers.
"""

from __future__ import annotations

from noti.inputs import POOL_NAME_PATTERN
from noti.numpool.borrow import borrowed_sender
from noti.numpool.pool import NumberPool
from noti.numpool.states import Event, NumberState, PoolSnapshot, PoolStats, Transition
from noti.redis.conn import PoolClient

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
