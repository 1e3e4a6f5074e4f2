"""The project's own Celery app, for the project's own tasks (``celery -A proj worker``).

noti has its own app and its own worker (``celery -A noti worker``): ``noti.tasks.notify``
is bound to it and is sent to noti's Redis, whichever app is current here.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

app = Celery("proj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
