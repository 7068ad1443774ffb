-- Contract x.subject_id is active and still renews on x.cycle, today or later.
EXISTS (SELECT 1 FROM contracts c
        WHERE c.id = x.subject_id AND c.status = 'active'
          AND CAST(c.renewal_date AS text) = x.cycle AND c.renewal_date >= CAST(:as_of AS date))
