-- A row about to be pruned keeps the digests of its copies (sql/prune_copies).
UPDATE dueflow_ledger SET copy_digests = :copy_digests
WHERE key = :key AND pruned_at IS NULL
