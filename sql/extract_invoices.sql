-- Invoices that may take part in dunning tonight: not paid, and not in a status
-- that ends dunning (draft, paid, void). Unknown statuses come along to be quarantined.
SELECT id, client_id, number, amount, currency, status, sent_at, due_date
FROM invoices
WHERE paid_at IS NULL
  AND (status IS NULL OR status NOT IN ('draft', 'paid', 'void'))
