-- Invoices that may take part in dunning tonight, plus every other row that shares an id
-- with one of them, so that a duplicated id is seen, and quarantined, whatever the other
-- copy says (G6). paid_at comes along: a copy pulled in by its id may be paid, and a
-- paid copy takes no part (without it, it would look open and quarantine the id).
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at
FROM invoices
WHERE /*include invoice_may_be_dunned*/
   OR id IN (SELECT id FROM invoices WHERE /*include invoice_may_be_dunned*/)
