-- Each invoice's dunning state: the last step in the ledger (or SENT), dated by the run
-- that got it out (or reserved it, while it is not out), with its ledger status;
-- PAID, VOID and DRAFT end or precede dunning. Its holds: the invoice's own
-- (dunning_hold_until), its client's pause (dunning_paused, read as text as
-- sql/fragments/invoice_open reads it; and its end), and the client's profile. The last
-- step's key, claim, permanence and retry time say its outcome (tasks/core/vocabulary.py).
SELECT i.id AS invoice_id, i.client_id, i.number, i.status AS invoice_status,
       CASE WHEN i.paid_at IS NOT NULL OR i.status = 'paid' THEN 'PAID'
            WHEN i.status = 'void' THEN 'VOID'
            WHEN i.status = 'draft' THEN 'DRAFT'
            ELSE COALESCE(last.step, 'SENT') END AS state,
       COALESCE(last.attempt_as_of, last.as_of) AS state_as_of, last.status AS step_status,
       last.key AS step_key, last.permanent AS step_permanent, last.sending_at AS step_sending_at,
       last.retry_after AS step_retry_after,
       (SELECT COUNT(*) FROM dueflow_ledger h WHERE h.job = 'dunning' AND h.subject_id = i.id) AS steps,
       i.dunning_hold_until AS hold_until,
       (SELECT MAX(c.dunning_paused_until) FROM clients c WHERE c.id = i.client_id) AS client_paused_until,
       (SELECT MAX(CASE WHEN lower(trim(COALESCE(c.dunning_paused, '')))
                             IN ('0', 'false', 'f', 'no', 'n', 'off', '') THEN 0 ELSE 1 END)
        FROM clients c WHERE c.id = i.client_id) AS client_paused,
       (SELECT MAX(c.dunning_profile) FROM clients c WHERE c.id = i.client_id) AS profile
FROM invoices i
LEFT JOIN dueflow_ledger last
  ON last.job = 'dunning' AND last.subject_id = i.id
 AND last.step_rank = (SELECT MAX(m.step_rank) FROM dueflow_ledger m
                       WHERE m.job = 'dunning' AND m.subject_id = i.id)
ORDER BY i.id
