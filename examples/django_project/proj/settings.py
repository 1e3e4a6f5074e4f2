"""Settings of the example project: only what it needs to run."""

import os
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "orders"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "proj.urls"
WSGI_APPLICATION = "proj.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get(
            "ORDERS_DB_PATH", str(Path(tempfile.gettempdir()) / "noti-example-orders.sqlite3")
        ),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# The project's Celery app (proj/celery.py) reads the CELERY_* settings. noti does not: it is
# configured by its NOTI_* environment variables (NOTI_REDIS_URL, NOTI_USER, ...).
# (The environment variable CELERY_BROKER_URL would do too: noti's app ignores it.)
CELERY_BROKER_URL = os.environ.get("PROJ_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_TASK_IGNORE_RESULT = True
