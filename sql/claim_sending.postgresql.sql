-- A delivery claims a group of rows just before handing them to SMTP, and sends exactly
-- what this returns: the message stored on the row (G2, G7). Only pending rows with a
-- stored message that no delivery claimed yet; `:token` names this delivery, so a retry
-- after a lost acknowledgement gets its own claims back while a second execution of the
-- same batch gets nothing. A statement's carrier (its smallest key: sql/unsent, the
-- night's deliveries) is claimed with the other rows of its statement, in the same
-- statement: they go as one email, whose outcome is recorded on each (docs/design.md,
-- statements); such a row asked for alone is never claimed.
-- The attempt is counted here, dated by the claiming run.
-- Two disjoint parts, each found through its own index (the keys asked for, by key; the
-- other rows of their statements, by statement_key): one condition OR-ing both let the
-- planner read every open row of the ledger for each group when its statistics were older
-- than the night's reservation — a surge's claims grew with the square of its size
-- (docs/performance.md, "Delivery").
WITH own AS (
    UPDATE dueflow_ledger
    SET sending_at = CURRENT_TIMESTAMP, attempt_as_of = CAST(:as_of AS date),
        attempts = attempts + CASE WHEN claim_token = :token THEN 0 ELSE 1 END,
        claim_token = :token, updated_at = CURRENT_TIMESTAMP
    WHERE key = ANY(CAST(:keys AS text[])) AND (statement_key IS NULL OR statement_key = key)
      AND status = 'pending' AND body_text IS NOT NULL
      AND (sending_at IS NULL OR claim_token = :token)
    RETURNING key, recipient, subject, body_text, body_html, message_id, cc_recipient, bcc_recipient,
              attachment_path, attachment_name, attachment_sha256, attachment_size, statement_key
), riders AS (
    UPDATE dueflow_ledger
    SET sending_at = CURRENT_TIMESTAMP, attempt_as_of = CAST(:as_of AS date),
        attempts = attempts + CASE WHEN claim_token = :token THEN 0 ELSE 1 END,
        claim_token = :token, updated_at = CURRENT_TIMESTAMP
    WHERE statement_key = ANY(CAST(:keys AS text[])) AND statement_key <> key
      AND status = 'pending' AND body_text IS NOT NULL
      AND (sending_at IS NULL OR claim_token = :token)
    RETURNING key, recipient, subject, body_text, body_html, message_id, cc_recipient, bcc_recipient,
              attachment_path, attachment_name, attachment_sha256, attachment_size, statement_key
)
SELECT * FROM own UNION ALL SELECT * FROM riders
