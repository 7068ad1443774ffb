-- Ledger row x is still meant to go out: its contract still renews on its cycle with no
-- more urgent lead since, or its invoice is still open with no later step since.
(x.job = 'renewal' AND /*include contract_renews_on_cycle*/ AND /*include renewal_no_more_urgent*/)
OR (x.job = 'dunning' AND /*include invoice_open*/
    AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                    WHERE m.job = 'dunning' AND m.subject_id = x.subject_id
                      AND m.step_rank > x.step_rank))
