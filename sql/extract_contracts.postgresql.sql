-- Renewal candidates: only rows that may be due tonight, plus every other row that shares
-- an id with one of them, so that a duplicated id is seen, and quarantined, whatever the
-- other copy says (G6).
SELECT id, vendor, title, amount, currency, renewal_date, notify_email, status
FROM contracts
WHERE /*include contract_may_be_due*/
   OR id IN (SELECT id FROM contracts WHERE /*include contract_may_be_due*/)
