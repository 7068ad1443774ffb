-- Contract x.subject_id is active and still renews on x.cycle, today or later.
EXISTS (SELECT 1 FROM contracts c
        WHERE c.id = x.subject_id AND c.status = 'active'
          AND date(c.renewal_date) = x.cycle AND date(c.renewal_date) >= :as_of)
