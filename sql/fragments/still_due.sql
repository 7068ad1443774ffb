-- Ledger row x is still meant to go out: its contract still renews on its cycle with no
-- more urgent lead since, or its invoice is still open with no later step since (but the
-- escalation of a reminder that bounced: the reminder, its address fixed, still goes out).
(x.job = 'renewal' AND /*include contract_renews_on_cycle*/ AND /*include renewal_no_more_urgent*/)
OR (x.job = 'dunning' AND /*include invoice_open*/
    AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                    WHERE m.job = 'dunning' AND m.subject_id = x.subject_id
                      AND m.step_rank > x.step_rank
                      AND NOT (m.step = 'OVERDUE' AND x.step IN ('REMINDED_1', 'REMINDED_2')
                               AND EXISTS (SELECT 1 FROM dueflow_bounces b WHERE b.key = x.key))))
