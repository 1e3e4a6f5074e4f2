from django.conf import settings
from django.db import models


class Order(models.Model):
    #: A guest order is texted at this number; a customer's order (``user`` set) is notified
    #: through the customer's noti recipient profile instead (``orders/signals.py``).
    phone = models.CharField(max_length=32, blank=True)
    item = models.CharField(max_length=100)
    shipped = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="orders"
    )

    def __str__(self) -> str:
        return f"Order {self.pk}: {self.item}"
