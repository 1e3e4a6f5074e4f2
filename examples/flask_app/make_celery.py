"""The app's own Celery worker: ``celery -A make_celery worker`` (not needed for noti)."""

from accounts import create_app

flask_app = create_app()
celery_app = flask_app.extensions["celery"]
