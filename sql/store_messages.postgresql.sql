-- Write the rendered messages onto reserved rows before any is sent (G2), fed with arrays
-- (docs/performance.md). The first
-- message stored on a row stays: a row that already has one, or that a delivery claimed,
-- keeps it, so whatever run sends a key sends the text the ledger holds (G7). A retry
-- stores its message again (sql/requeue_failed clears it): the address it was meant for
-- before is kept only when it differs.
UPDATE dueflow_ledger AS l
SET recipient = m.recipient, subject = m.subject, body_text = m.body_text,
    body_html = m.body_html, message_id = m.message_id,
    draft_source = m.draft_source, draft_note = m.draft_note, paragraph = m.paragraph,
    tone_plan = m.tone_plan, refused_answer = m.refused_answer,
    cc_recipient = m.cc_recipient, bcc_recipient = m.bcc_recipient,
    attachment_path = m.attachment_path, attachment_name = m.attachment_name,
    attachment_sha256 = m.attachment_sha256, attachment_size = CAST(m.attachment_size AS bigint),
    attachment_note = m.attachment_note, owed_state = m.owed_state, statement_key = m.statement_key,
    previous_recipient = NULLIF(l.previous_recipient, m.recipient), updated_at = CURRENT_TIMESTAMP
FROM unnest(CAST(:keys AS text[]), CAST(:recipients AS text[]), CAST(:subjects AS text[]),
            CAST(:bodies_text AS text[]), CAST(:bodies_html AS text[]),
            CAST(:message_ids AS text[]), CAST(:draft_sources AS text[]),
            CAST(:draft_notes AS text[]), CAST(:paragraphs AS text[]),
            CAST(:tone_plans AS text[]), CAST(:refused_answers AS text[]),
            CAST(:cc_recipients AS text[]), CAST(:bcc_recipients AS text[]),
            CAST(:attachment_paths AS text[]), CAST(:attachment_names AS text[]),
            CAST(:attachment_sha256s AS text[]), CAST(:attachment_sizes AS text[]),
            CAST(:attachment_notes AS text[]), CAST(:owed_states AS text[]), CAST(:statement_keys AS text[]))
     AS m(key, recipient, subject, body_text, body_html, message_id, draft_source, draft_note,
          paragraph, tone_plan, refused_answer, cc_recipient, bcc_recipient, attachment_path, attachment_name,
          attachment_sha256, attachment_size, attachment_note, owed_state, statement_key)
WHERE l.key = m.key AND l.status = 'pending' AND l.sending_at IS NULL AND l.body_text IS NULL
