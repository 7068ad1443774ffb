-- The ledger rows a batch of reports may be about, by the Message-IDs they quote.
SELECT key, message_id, status, sending_at FROM dueflow_ledger
WHERE message_id = ANY (CAST(:ids AS text[]))
