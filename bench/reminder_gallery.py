"""One invoice's two reminders, for a punctual client and for a habitual late payer, in every
locale, side by side with what each plan chose — rendered as a night renders them (dueflow's
rule, no model), then photographed by headless Chromium:

    .venv/bin/python -m bench.reminder_gallery docs/images     # reminders-en.png, -es.png, -de.png

Not a benchmark: the pictures docs/llm.md shows, made again whenever the phrasebook or the
templates change, and looked at.
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.llm_guard import rule_drafts
from dueflow.tasks.core.locales import LANGUAGES, SUPPORTED_LOCALES
from dueflow.tasks.core.phrasebook import default_phrasebook
from dueflow.tasks.core.render import EmailLook, compose_dunning_emails

SENDER = Mailbox("billing@harbour.example", "Harbour Supplies")
LOOK = EmailLook(company="Harbour Supplies Ltd", payment_instructions="IBAN GB33 BUKB 2020 1555 5555 55")
DUE = date(2027, 3, 1)
NIGHTS = {"REMINDED_1": DUE + timedelta(days=3), "REMINDED_2": DUE + timedelta(days=10)}
CLIENTS = {
    "punctual": ("Contoso Retail", [(-2, 0, 90), (0, 0, 60), (-1, 0, 30)]),
    "often late": ("Fabrikam Wholesale", [(24, 2, 120), (31, 2, 90), (12, 1, 45)]),
}


def reminder(locale: str, step: str, client: str, name: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": f"dunning/{client}-{locale}/{step}",
                "subject_id": f"{client}-{locale}",
                "step": step,
                "step_rank": 1 if step == "REMINDED_1" else 2,
                "number": "2027-0142",
                "amount": "4860.00",
                "currency": "EUR",
                "issue_date": DUE - timedelta(days=30),
                "due_date": DUE,
                "client_id": client,
                "client_name": name,
                "client_email": "ap@client.example",
                "locale": locale,
                "notes": None,
                "recipient": "ap@client.example",
            }
        ]
    )


def history(client: str, invoices: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "client_id": client,
                "invoice_id": f"{client}-p{n}",
                "number": f"P-{n}",
                "due_date": DUE - timedelta(days=ago),
                "paid_at": DUE - timedelta(days=ago - late),
                "days_late": late,
                "reminders": reminders,
            }
            for n, (late, reminders, ago) in enumerate(invoices)
        ]
    ).astype({"days_late": "Int64"})


def page(locale: str) -> str:
    book = default_phrasebook()
    cells = []
    for label, (name, invoices) in CLIENTS.items():
        client = label.replace(" ", "-")
        for step, night in NIGHTS.items():
            due = reminder(locale, step, client, name)
            [draft] = rule_drafts(due, history(client, invoices), night, book)
            steps = pd.DataFrame(
                [
                    {
                        "subject_id": f"{client}-{locale}",
                        "step": "REMINDED_1",
                        "step_rank": 1,
                        "as_of": NIGHTS["REMINDED_1"].isoformat(),
                        "status": "sent",
                    }
                ]
            )
            [email] = compose_dunning_emails(
                due, steps, SENDER, {draft.key: draft}, as_of=night, look=LOOK
            ).emails
            plan = draft.plan
            chosen = (
                "<br>".join(f"<code>{html.escape(i)}</code>" for i in plan.sentences) if plan else "template"
            )
            caption = (
                f"<b>{html.escape(label)} client, {'first' if step == 'REMINDED_1' else 'second'} reminder"
                f"</b> ({night:%d %b}: due {DUE:%d %b})<br>read as <b>{draft.relationship.value}</b>,"
                f" tone <b>{plan.tone.value if plan else '—'}</b>, by {draft.source.value}<br>{chosen}"
            )
            frame = html.escape(email.body_html, quote=True)
            cells.append(
                f'<td><div class="cap">{caption}</div><div class="subj">{html.escape(email.subject)}</div>'
                f'<iframe srcdoc="{frame}"></iframe></td>'
            )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><style>body{margin:12px;font:14px sans-serif;"
        "background:#ddd}td{vertical-align:top;padding:6px;width:25%}.cap{background:#fff;padding:8px;"
        "min-height:86px;border-radius:4px}.subj{background:#f6f6f6;padding:6px 8px;margin:4px 0;"
        "font-size:13px}iframe{width:100%;height:1000px;border:0;background:#fff}code{font-size:12px}"
        f"</style></head><body><h2>{LANGUAGES[locale]} ({locale}): one invoice's two reminders</h2>"
        f"<table style='width:100%;table-layout:fixed'><tr>{''.join(cells)}</tr></table></body></html>"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reminder_gallery", description=__doc__.splitlines()[0]
    )
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    chromium = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
    )
    if chromium is None:
        print("needs headless Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    args.folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for locale in SUPPORTED_LOCALES:
            source = Path(scratch) / f"{locale}.html"
            source.write_text(page(locale), encoding="utf-8")
            target = (args.folder / f"reminders-{locale}.png").resolve()
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--hide-scrollbars",
                    f"--user-data-dir={scratch}/profile",
                    f"--screenshot={target}",
                    "--window-size=2000,1180",
                    source.as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
