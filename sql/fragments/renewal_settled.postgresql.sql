-- Contract row p (with p.lead, tonight's due lead) needs no decision tonight: it is active,
-- its id is unique, its cycle already has this lead or a more urgent one in the ledger
-- (what tasks.core.renewal_rule calls "handled"), and tonight's key is neither pending nor
-- failed (those are reported as such, so they go through the decision).
-- tests/helpers/oracles.renewal_settled is the same rule over DataFrames (tested to agree).
p.lead IS NOT NULL AND p.status = 'active'
AND EXISTS (SELECT 1 FROM dueflow_ledger m
            WHERE m.job = 'renewal' AND m.subject_id = p.id
              AND m.cycle = CAST(p.renewal_date AS text) AND m.step_rank <= p.lead)
AND NOT EXISTS (SELECT 1 FROM dueflow_ledger k
                WHERE k.key = 'renewal/' || p.id || '/' || CAST(p.renewal_date AS text) || '/'
                              || CAST(p.lead AS text) || 'd'
                  AND k.status IN ('pending', 'failed'))
AND (SELECT count(*) FROM contracts d WHERE d.id = p.id) = 1
