-- Source tables (public contract, docs/design.md) and dueflow's own ledger, for SQLite and
-- PostgreSQL alike. Every statement is idempotent: `dueflow init-db` may run any number of times.
-- On SQLite, init-db declares the `numeric` columns as `text`: SQLite's NUMERIC affinity
-- would store 123456789012345678.99 as a 64-bit number and lose its last digits.

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
    id              text PRIMARY KEY,
    name            text,
    email           text,
    locale          text DEFAULT 'en',
    notes           text,
    dunning_paused  boolean DEFAULT false
);

CREATE TABLE IF NOT EXISTS invoices (
    id         text PRIMARY KEY,
    client_id  text,
    number     text,
    amount     numeric,
    currency   text,
    status     text,
    sent_at    timestamptz,
    due_date   date,
    paid_at    timestamptz
);
CREATE INDEX IF NOT EXISTS invoices_open ON invoices (status) WHERE paid_at IS NULL;

-- One row per email dueflow ever decided to send. The PRIMARY KEY on `key` is
-- guarantee G1: a second reservation of the same key is a no-op, whoever tries.
CREATE TABLE IF NOT EXISTS dueflow_ledger (
    key            text PRIMARY KEY,
    job            text NOT NULL,              -- 'renewal' | 'dunning'
    subject_id     text NOT NULL,              -- contract id | invoice id
    cycle          text NOT NULL,              -- renewal: renewal date; dunning: ''
    step           text NOT NULL,              -- '30d' | 'REMINDED_1' | ...
    step_rank      integer NOT NULL,           -- renewal: lead days; dunning: 1, 2, 3
    as_of          date NOT NULL,              -- business date of the reserving run
    -- 'adopted': recorded as handled when dueflow took over existing data; never sent.
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'sent', 'failed', 'adopted')),
    attempts       integer NOT NULL DEFAULT 0, -- delivery attempts started
    permanent      boolean NOT NULL DEFAULT false, -- failed with a 5xx: never retried
    retry_after    timestamptz,                -- failed: not retried before this (UTC)
    recipient      text,
    subject        text,
    body_text      text,
    body_html      text,
    message_id     text,
    draft_source   text,                       -- 'template' | 'llm' (dunning reminders)
    draft_note     text,                       -- why the template was used, or the LLM's tone
    smtp_response  text,
    error          text,
    flow_run_id    text,
    created_at     timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at     timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    sent_at        timestamptz,
    -- When a delivery batch claimed this attempt, just before sending it. A batch sends
    -- only rows it claimed, so a batch run twice (Dask or Prefect re-running a task)
    -- never sends twice; a pending row with no claim was surely never handed to SMTP.
    sending_at     timestamptz,
    -- The delivery that claimed it (sending_at): only that delivery records its outcome,
    -- and a retry after a lost acknowledgement gets back its own claims.
    claim_token    text,
    -- Business date of the run of the latest attempt: a dunning step is dated by the run
    -- that got it out (docs/design.md), which may be a later run than the one that reserved it.
    attempt_as_of  date
);
-- One partial index per job, renewals by cycle first (renewal_history is an index-only
-- scan): why, in docs/performance.md.
CREATE INDEX IF NOT EXISTS dueflow_ledger_renewals ON dueflow_ledger (cycle, subject_id, step_rank)
    WHERE job = 'renewal';
CREATE INDEX IF NOT EXISTS dueflow_ledger_dunning ON dueflow_ledger (subject_id, step_rank)
    WHERE job = 'dunning';
-- Replaced by the two above (init-db on a ledger made by an earlier version).
DROP INDEX IF EXISTS dueflow_ledger_subject;
DROP INDEX IF EXISTS dueflow_ledger_cycles;
-- The unsettled rows, keyed by `key` so that every per-key status change is a lookup
-- (docs/performance.md).
CREATE INDEX IF NOT EXISTS dueflow_ledger_open_keys ON dueflow_ledger (key)
    WHERE status IN ('pending', 'failed');

-- Rows that could not be processed, with the reason; one row per (job, row, reason),
-- refreshed each night the problem is still there.
CREATE TABLE IF NOT EXISTS dueflow_quarantine (
    job          text NOT NULL,
    source_id    text NOT NULL,
    reason       text NOT NULL,
    first_as_of  date NOT NULL,
    last_as_of   date NOT NULL,
    times_seen   integer NOT NULL DEFAULT 1,
    flow_run_id  text,
    PRIMARY KEY (job, source_id, reason)
);
