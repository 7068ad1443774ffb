-- Sample source relations for `dueflow demo` and `dueflow init-db --with-sample-tables`
-- (the public contract's columns, docs/your-data.md): created only when missing, in the
-- source schema. In production the sources are the company's own tables or views, which
-- dueflow reads and never writes. On SQLite, the `numeric` columns are declared `text`:
-- SQLite's NUMERIC affinity would store 123456789012345678.99 as a 64-bit number and lose
-- its last digits.

CREATE TABLE IF NOT EXISTS contracts (
    id            text PRIMARY KEY,
    vendor        text,
    title         text,
    amount        numeric,
    currency      text,
    renewal_date  date,
    notify_email  text,
    status        text
);
CREATE INDEX IF NOT EXISTS contracts_renewal_date ON contracts (renewal_date);

CREATE TABLE IF NOT EXISTS clients (
    id                    text PRIMARY KEY,
    name                  text,
    email                 text,
    locale                text DEFAULT 'en',
    notes                 text,
    dunning_paused        boolean DEFAULT false,
    dunning_paused_until  date,
    cc_email              text,
    dunning_profile       text
);

CREATE TABLE IF NOT EXISTS invoices (
    id                  text PRIMARY KEY,
    client_id           text,
    number              text,
    amount              numeric,
    currency            text,
    status              text,
    sent_at             timestamptz,
    due_date            date,
    paid_at             timestamptz,
    dunning_hold_until  date,
    pdf_path            text
);
CREATE INDEX IF NOT EXISTS invoices_open ON invoices (status) WHERE paid_at IS NULL;
-- Each chunk of reminders reads its clients' invoices (their payment history: the tone).
CREATE INDEX IF NOT EXISTS invoices_client_id ON invoices (client_id);
