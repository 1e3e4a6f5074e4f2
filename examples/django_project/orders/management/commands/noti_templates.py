"""``python manage.py noti_templates``: put the project's noti templates into noti (a deploy step).

Each file of ``orders/noti_templates/`` is a template document, ``<name>.toml`` or
``<name>.json``. A file whose document is noti's current version already is skipped, so
running this on every deploy makes a new version only of the templates that changed (a
notice uses the current version; older ones stay readable). ``noti template put`` does the
same from a shell.
"""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

import noti
from noti import recipients
from noti.recipients.templates import check_document, load_file

TEMPLATES = Path(__file__).resolve().parents[2] / "noti_templates"


class Command(BaseCommand):
    help = "Put the project's noti templates (orders/noti_templates/) into noti."

    def handle(self, *args: Any, **options: Any) -> None:
        for path in sorted([*TEMPLATES.glob("*.toml"), *TEMPLATES.glob("*.json")]):
            try:
                name, doc = load_file(path)
                wanted = check_document(doc)  # the document as noti stores it, checked whole
            except noti.InvalidInput as exc:  # nothing stored
                raise CommandError(f"{path.name}: {exc.code}: {exc.message}") from None
            try:
                current = recipients.get_template(name).document()
            except noti.NotFound:
                current = None
            if current == wanted:
                self.stdout.write(f"{name}: unchanged")
                continue
            self.stdout.write(f"{name}: version {recipients.put_template(name, doc)}")
