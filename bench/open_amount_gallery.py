"""One invoice paid in part, its second reminder as a night renders it — the open amount
first, what the invoice was and what came in, a fee, statutory interest and a pay-by date —
in each locale, photographed by headless Chromium (issue 43):

    .venv/bin/python -m bench.open_amount_gallery docs/images   # open-amount-{en,es,de}.png

Through the real path: the company's rows and payment in the in-memory store, a profile
that asks for the fee, interest and pay-by date, the extract, the rule and the templates.
Not a benchmark: the pictures docs/your-data.md shows, made again when the templates
change, and looked at.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

from dueflow.blocks.settings import Settings
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.parameters import run_parameters
from dueflow.tasks.jobs import night_jobs

AS_OF = date(2027, 3, 17)
PROFILES = """[profiles.eu-b2b]
delays = [7, 7, 14]
fees = { REMINDED_2 = "EUR 10" }
interest = ["REMINDED_2"]
pay_within = { REMINDED_2 = 10 }
"""


def second_reminder(locale: str, profiles: Path) -> str:
    """The HTML of the second reminder of a 4,860.00 EUR invoice, 1,860.00 paid on 5 March."""
    env = {"DUEFLOW_MAIL_FROM": "Harbour Supplies <billing@harbour.example>",
           "DUEFLOW_ESCALATION_TO": "collections@harbour.example",
           "DUEFLOW_COMPANY_NAME": "Harbour Supplies Ltd", "DUEFLOW_PROFILES_FILE": str(profiles),
           "DUEFLOW_REFERENCE_RATES": "2026-07-01 2.15, 2027-01-01 2.40", "DUEFLOW_HOLIDAYS": "ES-MD",
           "DUEFLOW_BUSINESS_DAYS": "mon-fri"}
    store = memory_store(
        clients=[{"id": "cl1", "name": "Contoso Retail", "email": "ap@contoso.example", "locale": locale,
                  "notes": None, "dunning_paused": False, "dunning_profile": "eu-b2b"}],
        invoices=[{"id": "2027-0142", "client_id": "cl1", "number": "2027-0142", "amount": "4860.00",
                   "currency": "EUR", "status": "sent", "sent_at": "2027-01-30", "due_date": "2027-03-01",
                   "paid_at": None}],
        payments=[{"invoice_id": "2027-0142", "amount": "1860.00", "currency": "EUR",
                   "received_at": "2027-03-05"}])
    store.ledger.rows["dunning/2027-0142/REMINDED_1"] = {  # type: ignore[attr-defined]
        "key": "dunning/2027-0142/REMINDED_1", "job": "dunning", "subject_id": "2027-0142",
        "step": "REMINDED_1", "step_rank": 1, "as_of": (AS_OF - timedelta(days=7)).isoformat(),
        "attempt_as_of": None, "status": "sent", "cycle": ""}
    params = run_parameters(renewal_leads=[60, 30, 15], dunning_delays=[7, 7, 14], dunning_start="sent",
                            renewal_locale="en", retry_max_attempts=5, retry_backoff_minutes=30,
                            send_cap=None, adopt=False, dry_run=False)
    _, dunning = night_jobs(Settings.from_env(env), params, "gallery")
    extracted = dunning.extract(store, AS_OF)
    due = dunning.decide(extracted, AS_OF).due
    [email] = dunning.compose(due, extracted, AS_OF, {}).emails
    return email.body_html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.open_amount_gallery",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    names = ("chromium", "chromium-browser", "google-chrome")
    chromium = next((p for p in map(shutil.which, names) if p), None)
    if chromium is None:
        print("needs headless Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    args.folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        profiles = Path(scratch) / "profiles.toml"
        profiles.write_text(PROFILES, encoding="utf-8")
        for locale in ("en", "es", "de"):
            source = Path(scratch) / f"{locale}.html"
            source.write_text(second_reminder(locale, profiles), encoding="utf-8")
            target = (args.folder / f"open-amount-{locale}.png").resolve()
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--hide-scrollbars", f"--user-data-dir={scratch}/profile",
                            f"--screenshot={target}", "--window-size=760,960", source.as_uri()],
                           check=True, capture_output=True, timeout=60)
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
