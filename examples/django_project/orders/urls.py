from django.urls import path

from . import views

urlpatterns = [
    path("", views.place_order, name="place-order"),
    path("<int:pk>/shipped/", views.mark_shipped, name="mark-shipped"),
]
