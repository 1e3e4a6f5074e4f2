# Load the project's Celery app when Django starts, so its tasks use it.
from .celery import app as celery_app

__all__ = ("celery_app",)
