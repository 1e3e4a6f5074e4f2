"""Two ways to notify from a view.

``place_order`` sends noti's Celery task once the order is committed; ``mark_shipped`` calls
noti's Python API, which validates and stores the notification at once and returns its id.
A customer's order (one with a ``user``) is notified by a signal instead, through the
customer's noti recipient profile and a template (``signals.py``).
"""

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import noti
import noti.tasks

from .models import Order


@csrf_exempt  # a demo API without sessions; keep your own CSRF and auth policy
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    phone, item = request.POST.get("phone", ""), request.POST.get("item", "")
    if not phone or not item:
        return JsonResponse({"error": "phone and item are required"}, status=400)
    with transaction.atomic():
        order = Order.objects.create(phone=phone, item=item)
        # Sent only if the order is committed: a rolled-back order notifies no one.
        transaction.on_commit(
            lambda: noti.tasks.notify.delay(
                type="sms", target=order.phone, text=f"Order {order.pk} received: {order.item}"
            )
        )
    return JsonResponse({"order": order.pk}, status=201)


@csrf_exempt
@require_POST
def mark_shipped(request: HttpRequest, pk: int) -> JsonResponse:
    order = get_object_or_404(Order, pk=pk)
    order.shipped = True
    order.save(update_fields=["shipped"])  # a customer's order: signals.order_saved notifies them
    if order.user_id is not None:
        return JsonResponse({"order": order.pk, "notified": "recipient"})
    try:
        record_id = noti.notify_sms(
            order.phone,
            f"Order {order.pk} has shipped",
            # a repeated request (double click, client retry) makes no second SMS
            idempotency_key=f"order-{order.pk}:shipped",
        )
    except noti.InvalidInput as exc:
        return JsonResponse({"error": exc.code, "message": exc.message}, status=400)
    return JsonResponse({"order": order.pk, "notification": record_id})
