"""Prefect blocks for dueflow's settings; secrets are SecretStr and never printed.

Register them once per Prefect server:

    prefect block register -m blocks.prefect_blocks
    prefect block register -m prefect_email      # EmailServerCredentials, for mail

Name a block in the environment and it overrides the matching variables:
DUEFLOW_DATABASE_BLOCK (DueflowDatabase), DUEFLOW_MAIL_BLOCK (prefect-email's
EmailServerCredentials), DUEFLOW_LLM_BLOCK (DueflowLLM), DUEFLOW_EMAIL_BLOCK (DueflowEmail),
DUEFLOW_SOURCES_BLOCK (DueflowSources), DUEFLOW_BOUNCE_BLOCK (DueflowBounceMailbox),
DUEFLOW_PROFILES_BLOCK (DueflowProfiles), DUEFLOW_PHRASEBOOK_BLOCK (DueflowPhrasebook).
"""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr


class DueflowDatabase(Block):
    """Where the source tables and the ledger live."""

    _block_type_name = "Dueflow Database"
    url: SecretStr = Field(description="SQLAlchemy URL, e.g. postgresql://user:pass@host/db")


class DueflowLLM(Block):
    """An OpenAI-compatible model that drafts the personalised reminder paragraph."""

    _block_type_name = "Dueflow LLM"
    api_key: SecretStr
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint")
    model: str = "gpt-4o-mini"


class DueflowEmail(Block):
    """How one company's emails look, who they are from and what they say about it
    (DUEFLOW_EMAIL_BLOCK, or the flow's `email_block` parameter: one deployment per
    company). A field left empty keeps the matching variable (docs/emails.md)."""

    _block_type_name = "Dueflow Email"
    mail_from: str | None = Field(default=None, description="The sender: ar@acme.example or Name <…>")
    mail_from_name: str | None = Field(default=None, description="The From name, e.g. Acme Finance")
    reply_to: str | None = Field(default=None, description="Where replies go: ar@acme.example or Name <…>")
    company_name: str | None = Field(default=None, description="Shown at the top of every email")
    signature: str | None = Field(default=None, description="Closing lines of every email")
    payment_instructions: str | None = Field(default=None, description="How to pay: bank account, reference…")
    payment_link: str | None = Field(
        default=None,
        description="https://pay.example/{number}: {number}, {invoice_id}, {amount}, {currency}")
    contract_contact: str | None = Field(default=None, description="Who to ask about a contract")
    templates_dir: str | None = Field(default=None,
                                      description="Directory of templates that override dueflow's")
    escalation_to: str | None = Field(default=None, description="Where OVERDUE escalations go")
    bcc: str | None = Field(default=None, description="The archive: a copy of every email, envelope only")
    invoice_pdf: str | None = Field(default=None,
                                    description="Invoice PDFs for reminders: /srv/acme/{number}.pdf")
    profiles_file: str | None = Field(default=None,
                                      description="This company's dunning profiles (TOML file)")
    profiles_block: str | None = Field(default=None,
                                       description="Or the name of a DueflowProfiles block holding them")
    phrasebook_file: str | None = Field(default=None,
                                        description="This company's reviewed reminder sentences (TOML file)")
    phrasebook_block: str | None = Field(default=None,
                                         description="Or the name of a DueflowPhrasebook block holding them")


class DueflowSources(Block):
    """Where dueflow's columns come from in the company's own tables or views: the text of
    a mapping file (DUEFLOW_SOURCES_BLOCK; docs/your-data.md). For teams that cannot put a
    file beside the worker or create a view in the production database."""

    _block_type_name = "Dueflow Sources"
    mapping: str = Field(description="The mapping, in TOML: [invoices] relation = \"…\" …")


class DueflowProfiles(Block):
    """Named dunning profiles chosen per client (`clients.dunning_profile`): the text of a
    DUEFLOW_PROFILES_FILE, in TOML (docs/configuration.md, "Dunning profiles")."""

    _block_type_name = "Dueflow Profiles"
    profiles: str = Field(description="The profiles, in TOML: [profiles.key-account] delays = [14, 14, 30] …")


class DueflowPhrasebook(Block):
    """A company's own reviewed sentences for its reminders' paragraph, over dueflow's or in
    their place: the text of a DUEFLOW_PHRASEBOOK_FILE, in TOML (docs/llm.md, "Your own
    phrasebook"). `dueflow check --phrasebook` lists every sentence for review."""

    _block_type_name = "Dueflow Phrasebook"
    phrasebook: str = Field(description="The sentences, in TOML: mode = \"extend\" [[sentence]] id = \"…\" …")


class DueflowBounceMailbox(Block):
    """The mailbox bounces arrive at (DUEFLOW_BOUNCE_BLOCK; docs/bounces.md)."""

    _block_type_name = "Dueflow Bounce Mailbox"
    url: SecretStr = Field(description="imaps://user:pass@host/INBOX, or maildir:///path")
    address: str | None = Field(default=None, description="The envelope sender (MAIL FROM) whose"
                                " bounces arrive there, e.g. bounces@acme.example")
