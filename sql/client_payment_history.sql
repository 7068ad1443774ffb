-- Payment history of every client that has an open invoice (one that may take part in
-- dunning: not paid, not draft/paid/void), for the LLM paragraph's tone (tasks/llm.py).
-- One row per invoice of those clients, open ones included; drafts and void invoices
-- were never payable and are left out. `reminders` counts the REMINDED_1/REMINDED_2
-- emails surely sent for the invoice (ledger status 'sent').
-- Portable SQLite + PostgreSQL: no date arithmetic here. `days_late` (paid_at's
-- business date minus due_date) is computed by tasks.llm.payment_history_frame.
SELECT i.client_id,
       i.id AS invoice_id,
       i.number,
       i.amount,
       i.amount_minor,
       i.currency,
       i.status,
       i.due_date,
       i.paid_at,
       (SELECT COUNT(*) FROM dueflow_ledger l
         WHERE l.job = 'dunning' AND l.subject_id = i.id
           AND l.step IN ('REMINDED_1', 'REMINDED_2') AND l.status = 'sent') AS reminders
FROM invoices i
WHERE (i.status IS NULL OR i.status NOT IN ('draft', 'void'))
  AND i.client_id IN (SELECT o.client_id FROM invoices o
                      WHERE o.paid_at IS NULL
                        AND (o.status IS NULL OR o.status NOT IN ('draft', 'paid', 'void')))
ORDER BY i.client_id, i.due_date, i.id
