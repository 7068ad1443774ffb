-- The payment history of the clients of tonight's reminders (their ids): every invoice of
-- theirs that was ever payable (drafts and void invoices never were), the reminded ones
-- included (core.tone.relationships leaves each out of its own history). It is how dueflow
-- reads a client — new, long-standing, punctual, lately or often late — for the tone of
-- its reminder, and what the model is shown of it: no amounts. `reminders` counts the
-- REMINDED_1/REMINDED_2 emails surely sent for the invoice (ledger status 'sent').
-- Portable date handling: `days_late` is computed by core.tone.payment_history_frame.
SELECT i.client_id,
       i.id AS invoice_id,
       i.number,
       i.due_date,
       i.paid_at,
       (SELECT COUNT(*) FROM dueflow_ledger l
         WHERE l.job = 'dunning' AND l.subject_id = i.id
           AND l.step IN ('REMINDED_1', 'REMINDED_2') AND l.status = 'sent') AS reminders
FROM invoices i
WHERE i.client_id = ANY(CAST(:ids AS text[]))
  AND (i.status IS NULL OR i.status NOT IN ('draft', 'void'))
