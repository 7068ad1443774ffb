-- The ledger rows a batch of reports may be about, by the Message-IDs they quote.
-- Its copies (Cc, Bcc): a report about one of them is not about the recipient.
SELECT key, message_id, status, sending_at, recipient, cc_recipient, bcc_recipient
FROM dueflow_ledger
WHERE message_id IN (SELECT value FROM json_each(:ids))
