-- Invoice x.subject_id still takes part in dunning: 'sent', unpaid, its client found and
-- not paused. tasks.decide.due_dunning_steps applies the same rule to extracted rows.
EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
        WHERE i.id = x.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
          AND cl.dunning_paused IS NOT TRUE)
