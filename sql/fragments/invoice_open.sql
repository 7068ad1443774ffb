-- Invoice x.subject_id still takes part in dunning: 'sent', unpaid, its client found and
-- not paused. dunning_paused is read as text (tasks/adapters/sources.py: a boolean, 0/1,
-- or text through its value map): the false spellings of tasks.core.validate.FALSE_TEXT,
-- or NULL, are "not paused". tasks.core.dunning_rule.due_dunning_steps applies the same rule to
-- extracted rows.
EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
        WHERE i.id = x.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
          AND lower(trim(COALESCE(cl.dunning_paused, ''))) IN ('0', 'false', 'f', 'no', 'n', 'off', ''))
