"""Keep noti's recipients in step with the project's users, and notify a user from their order.

noti knows a person as a *recipient*: a profile (addresses per channel, locale, timezone,
attributes) under an id of the project's choice, here the user's primary key, belonging to
the noti user this process acts as (``NOTI_USER``). These receivers:

* a user saved: their profile gets what the project owns of it (:func:`profile_patch`) as a
  JSON merge patch, so what is set elsewhere (a device token the mobile app added through
  noti's HTTP API, the person's preferences) stays;
* an order of a user marked shipped: noti's task ``noti.notify`` for the recipient, with the
  template ``order_shipped`` and its data, in the category ``orders``; noti's worker reads
  the profile, applies the preferences and quiet hours, renders and sends;
* a user deleted: their profile erased (the right to be forgotten).

Each runs once the transaction commits (``transaction.on_commit``): a rolled-back save
notifies no one and erases nothing. The profile calls go to noti's Redis from this process
(one round trip each); ``robust=True`` makes a refusal (an address noti does not take) a
logged error rather than a failure of the request that saved the user.
"""

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

import noti
import noti.tasks
from noti import recipients

from .models import Order

#: Saves that change nothing of the profile (``login()`` saves ``last_login`` alone).
NOT_IN_PROFILE = frozenset({"last_login", "password"})


def recipient_id(user_pk: object) -> str:
    """The noti recipient id of a user: their primary key."""
    return str(user_pk)


def profile_patch(user: Any) -> dict[str, Any]:
    """What the project owns of a user's profile, as a JSON merge patch (None removes)."""
    return {
        "addresses": {"email": [user.email] if user.email else None},
        "attributes": {"name": user.get_full_name() or user.get_username()},
    }


def sync_profile(rid: str, patch: dict[str, Any]) -> None:
    """Apply ``patch`` to recipient ``rid``; make the profile the first time."""
    try:
        recipients.update(rid, patch)
    except noti.NotFound:
        recipients.put(rid, patch)


def erase_profile(rid: str) -> None:
    """Erase recipient ``rid`` (see "Erasure" in noti's recipients concepts page)."""
    try:
        recipients.delete(rid)
    except noti.NotFound:  # never synced, or erased already
        pass


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def user_saved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and set(update_fields) <= NOT_IN_PROFILE:
        return
    # read now: the instance may change before the commit
    rid, patch = recipient_id(instance.pk), profile_patch(instance)

    def sync() -> None:
        sync_profile(rid, patch)

    transaction.on_commit(sync, robust=True)


@receiver(post_delete, sender=settings.AUTH_USER_MODEL)
def user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    rid = recipient_id(instance.pk)

    def erase() -> None:
        erase_profile(rid)

    transaction.on_commit(erase, robust=True)


@receiver(post_save, sender=Order)
def order_saved(sender: Any, instance: Order, update_fields: Any = None, **kwargs: Any) -> None:
    """A customer's order marked shipped: tell the customer, on the channels they take."""
    if instance.user_id is None or not instance.shipped:
        return
    if update_fields is not None and "shipped" not in update_fields:
        return
    rid, data = recipient_id(instance.user_id), {"order": instance.pk, "item": instance.item}
    key = f"order-{instance.pk}:shipped"  # saved shipped again: the same notice, no second one

    def notify() -> None:
        noti.tasks.notify.delay(
            recipient=rid, template="order_shipped", data=data, category="orders", idempotency_key=key
        )

    transaction.on_commit(notify)
