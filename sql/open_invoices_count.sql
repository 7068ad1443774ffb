-- How many invoices are open (sent, not paid): a night that would remind more than a share
-- of them, or finds many more than the last night, waits for a person (tasks/core/guard.py).
SELECT count(*) AS open_invoices FROM invoices WHERE status = 'sent' AND paid_at IS NULL
