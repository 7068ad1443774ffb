-- SQLite flavour of renewal_settled.postgresql.sql (dates are text, read through date();
-- a renewal date that is not a plain date, such as one with an offset, is decided by the
-- rules, which date it in the business zone).
p.lead IS NOT NULL AND p.status = 'active' AND p.renewal_date = date(p.renewal_date)
AND EXISTS (SELECT 1 FROM dueflow_ledger m
            WHERE m.job = 'renewal' AND m.subject_id = p.id
              AND m.cycle = date(p.renewal_date) AND m.step_rank <= p.lead)
AND NOT EXISTS (SELECT 1 FROM dueflow_ledger k
                WHERE k.key = 'renewal/' || p.id || '/' || date(p.renewal_date) || '/'
                              || CAST(p.lead AS text) || 'd'
                  AND k.status IN ('pending', 'failed'))
AND (SELECT count(*) FROM contracts d WHERE d.id = p.id) = 1
