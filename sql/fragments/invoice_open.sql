-- Invoice x.subject_id still takes part in dunning: 'sent', unpaid, its client found and
-- not paused (SQLite stores booleans as 0/1 or text: the false spellings of
-- tasks.validate.FALSE_TEXT, or NULL).
EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
        WHERE i.id = x.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
          AND lower(trim(CAST(COALESCE(cl.dunning_paused, '') AS text)))
              IN ('0', 'false', 'f', 'no', 'n', 'off', ''))
