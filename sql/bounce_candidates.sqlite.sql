-- The ledger rows a batch of reports may be about, by the Message-IDs they quote.
-- Its copies (Cc, Bcc; once pruned, their digests): a report about one of them is not about
-- the recipient.
SELECT key, message_id, status, sending_at, recipient, cc_recipient, bcc_recipient, copy_digests
FROM dueflow_ledger
WHERE message_id IN (SELECT value FROM json_each(:ids))
