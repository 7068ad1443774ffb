-- Invoices that may take part in dunning tonight, plus every other row that shares an id
-- with one of them, so that a duplicated id is seen, and quarantined, whatever the other
-- copy says (G6). paid_at comes along: a copy pulled in by its id may be paid, and a
-- paid copy takes no part (without it, it would look open and quarantine the id). Two
-- branches, not `may_be_dunned OR id IN (…)`, which reads every row (extract_contracts).
-- The whole set: `dueflow forecast` and `check` read it; a night reads dunning_candidates.
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path
FROM invoices
WHERE id IN (SELECT id FROM invoices WHERE /*include invoice_may_be_dunned*/)
UNION ALL
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path
FROM invoices
WHERE id IS NULL AND /*include invoice_may_be_dunned*/
