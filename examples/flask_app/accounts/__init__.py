"""A minimal Flask app that notifies through noti, with its own Celery app.

The Celery app is made by ``celery_init_app``, as in Flask's "Background Tasks with Celery"
page, for the app's own tasks (``celery -A make_celery worker``). noti has its own app and its
own worker (``celery -A noti worker``), and is configured by its NOTI_* environment variables.
"""

import os
from collections.abc import Mapping
from typing import Any

from celery import Celery, Task
from flask import Flask


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):
        def __call__(self, *args: object, **kwargs: object) -> object:
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(app.config["CELERY"])
    celery_app.set_default()
    app.extensions["celery"] = celery_app
    return celery_app


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        CELERY={
            # not CELERY_BROKER_URL: Celery lets that variable override every app's broker, noti's too
            "broker_url": os.environ.get("ACCOUNTS_BROKER_URL", "redis://127.0.0.1:6379/0"),
            "task_ignore_result": True,
        },
    )
    app.config.from_prefixed_env()
    if config is not None:
        app.config.from_mapping(config)
    celery_init_app(app)

    from . import views

    app.register_blueprint(views.bp)
    return app
