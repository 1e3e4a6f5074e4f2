"""The project's own Celery tasks, run by its own worker (``celery -A proj worker``).

A task of the project notifies through noti as a view does: ``noti.tasks.notify.delay()``
sends noti's task to noti's Redis, whichever app runs this task, and noti's worker delivers
it. Importing ``noti.tasks`` adds nothing to this project's worker: noti's tasks stay in
noti's app, and its worker hooks run only in ``celery -A noti worker``.
"""

from celery import shared_task

import noti.tasks

from .models import Order


@shared_task
def remind_unshipped(order_id: int) -> str | None:
    """Text the customer that an order not yet shipped is on its way; noti's task id, or None."""
    order = Order.objects.get(pk=order_id)
    if order.shipped:
        return None
    result = noti.tasks.notify.delay(
        type="sms", target=order.phone, text=f"Order {order.pk} ships soon: {order.item}"
    )
    return str(result.id)
