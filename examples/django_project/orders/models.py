from django.db import models


class Order(models.Model):
    phone = models.CharField(max_length=32)
    item = models.CharField(max_length=100)
    shipped = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Order {self.pk}: {self.item}"
