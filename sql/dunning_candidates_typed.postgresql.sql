-- sql/dunning_candidates (the same rows, the same columns) when the start the night counts
-- from is a typed column (timestamptz, timestamp or date; ResolvedSources.typed_start says
-- when) and :start is 'sent' or 'due'. The open invoices are not all read: those with a
-- step whose wait is over come by id (dated), the step-less ones by the typed range of
-- their start (fragments/dunning_start_typed), each branch servable by an index
-- (`dueflow check --sources` names them). The text comparison it replaces holds only when
-- DateStyle writes ISO dates; under any other, every step-less open invoice comes along
-- (as it did: no text matched) by a third branch, which runs only then.
-- tests/integration/test_dunning_candidates.py holds the two to the same night.
WITH /*insert dunning_waits*/, picked AS MATERIALIZED (
    SELECT o.id, o.client_id, o.number, o.amount, o.amount_minor, o.currency, o.status, o.sent_at, o.due_date, o.paid_at, o.dunning_hold_until, o.pdf_path, o.amount_open, o.amount_paid
    FROM invoices o
    WHERE o.id IN (SELECT subject_id FROM dated)
      AND /*include invoice_may_be_dunned*/
      AND (o.dunning_hold_until IS NULL OR o.dunning_hold_until <= CAST(:hold_as_of AS date))
    UNION ALL
    SELECT o.id, o.client_id, o.number, o.amount, o.amount_minor, o.currency, o.status, o.sent_at, o.due_date, o.paid_at, o.dunning_hold_until, o.pdf_path, o.amount_open, o.amount_paid
    FROM invoices o
    WHERE /*include invoice_may_be_dunned*/
      AND (o.dunning_hold_until IS NULL OR o.dunning_hold_until <= CAST(:hold_as_of AS date))
      AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.subject_id = o.id)
      AND /*include dunning_start_typed*/
      AND current_setting('DateStyle') LIKE 'ISO%'
    UNION ALL
    SELECT o.id, o.client_id, o.number, o.amount, o.amount_minor, o.currency, o.status, o.sent_at, o.due_date, o.paid_at, o.dunning_hold_until, o.pdf_path, o.amount_open, o.amount_paid
    FROM invoices o
    WHERE /*include invoice_may_be_dunned*/
      AND (o.dunning_hold_until IS NULL OR o.dunning_hold_until <= CAST(:hold_as_of AS date))
      AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.subject_id = o.id)
      AND current_setting('DateStyle') NOT LIKE 'ISO%'
),
/*insert dunning_candidate_rows*/
