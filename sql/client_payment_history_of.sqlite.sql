-- SQLite flavour of client_payment_history_of.postgresql.sql.
SELECT i.client_id,
       i.id AS invoice_id,
       i.number,
       i.due_date,
       i.paid_at,
       (SELECT COUNT(*) FROM dueflow_ledger l
         WHERE l.job = 'dunning' AND l.subject_id = i.id
           AND l.step IN ('REMINDED_1', 'REMINDED_2') AND l.status = 'sent') AS reminders
FROM invoices i
WHERE i.client_id IN (SELECT value FROM json_each(:ids))
  AND (i.status IS NULL OR i.status NOT IN ('draft', 'void'))
