"""Two ways to notify from a route.

``/signup`` calls noti's Python API: the e-mail is validated and stored before the route
returns, so bad input is a 400 here. ``/login-code`` sends noti's Celery task: the route only
publishes a message, and noti's worker validates, stores and delivers it.
"""

import secrets

from flask import Blueprint, request

import noti
import noti.tasks

bp = Blueprint("accounts", __name__)


@bp.post("/signup")
def signup() -> tuple[dict[str, str], int]:
    data = request.get_json(silent=True) or {}
    email, name = str(data.get("email", "")), str(data.get("name", "there"))
    try:
        record_id = noti.notify_email(email, subject="Welcome!", text=f"Hello {name}, welcome aboard.")
    except noti.InvalidInput as exc:
        return {"error": exc.code, "message": exc.message}, 400
    return {"notification": record_id}, 201


@bp.post("/login-code")
def login_code() -> tuple[dict[str, str], int]:
    data = request.get_json(silent=True) or {}
    phone = str(data.get("phone", ""))
    if not phone:
        return {"error": "phone is required"}, 400
    code = f"{secrets.randbelow(10**6):06d}"
    # (a real app would store the code to check it at login)
    result = noti.tasks.notify.delay(type="sms", target=phone, text=f"Your login code is {code}")
    return {"task": result.id}, 202
