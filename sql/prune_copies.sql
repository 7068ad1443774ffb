-- Before a batch of sql/prune_bodies (the same rows, the same order): each row's copies,
-- so that what a copy's late bounce needs is kept as digests when the addresses go.
SELECT key, recipient, cc_recipient, bcc_recipient
FROM dueflow_ledger
WHERE status IN ('sent', 'adopted') AND pruned_at IS NULL
  AND COALESCE(attempt_as_of, as_of) < :before
  AND (cc_recipient IS NOT NULL OR bcc_recipient IS NOT NULL)
  AND key IN (SELECT key FROM dueflow_ledger
              WHERE status IN ('sent', 'adopted') AND pruned_at IS NULL
                AND COALESCE(attempt_as_of, as_of) < :before
              ORDER BY key
              LIMIT :batch)
