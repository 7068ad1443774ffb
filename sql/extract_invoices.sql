-- Invoices that may take part in dunning tonight, plus every other row that shares an id
-- with one of them, so that a duplicated id is seen, and quarantined, whatever the other
-- copy says (G6).
SELECT id, client_id, number, amount, currency, status, sent_at, due_date
FROM invoices
WHERE /*include invoice_may_be_dunned*/
   OR id IN (SELECT id FROM invoices WHERE /*include invoice_may_be_dunned*/)
