-- The invoices a night decides dunning for: open ones whose next step may be due tonight
-- (sql/fragments/dunning_candidate), plus every other row that shares an id with one of
-- them, so that a duplicated id is seen, and quarantined, whatever the other copy says
-- (G6); candidates without an id come by the second branch. Open invoices sent days ago
-- and not due for days are not read, nor their clients or history (docs/performance.md).
-- steps: each invoice's last step in the ledger; dated: those whose wait is over; paid:
-- what was paid and credited on the picked invoices up to :as_of (payments_of).
WITH steps AS MATERIALIZED (
    SELECT m.subject_id, MAX(m.step_rank) AS step_rank
    FROM dueflow_ledger m WHERE m.job = 'dunning'
    GROUP BY m.subject_id
), dated AS MATERIALIZED (
    SELECT s.subject_id
    FROM steps s
    JOIN dueflow_ledger m ON m.job = 'dunning' AND m.subject_id = s.subject_id AND m.step_rank = s.step_rank
    WHERE (s.step_rank = 1 AND COALESCE(m.attempt_as_of, m.as_of) <= :after_first_by)
       OR (s.step_rank = 2 AND COALESCE(m.attempt_as_of, m.as_of) <= :after_second_by)
), picked AS MATERIALIZED (
    SELECT o.* FROM (
        SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path, amount_open, amount_paid,
               CASE :start WHEN 'sent' THEN CAST(sent_at AS text) WHEN 'due' THEN CAST(due_date AS text) END AS start_text
        FROM invoices
        WHERE /*include invoice_may_be_dunned*/
          -- held tonight: only a plain, real YYYY-MM-DD after it (date(julianday()) gives
          -- 2027-02-30 back as March 2nd); any other text comes along, for the rule to read
          -- or quarantine
          AND NOT COALESCE(date(julianday(dunning_hold_until)) = dunning_hold_until
                           AND dunning_hold_until > :hold_as_of, 0)
    ) o
    WHERE /*include dunning_candidate*/
), payments_wanted AS MATERIALIZED (
    SELECT id AS invoice_id FROM picked WHERE id IS NOT NULL
), paid AS MATERIALIZED /*include payments_of*/
SELECT i.id, i.client_id, i.number, i.amount, i.amount_minor, i.currency, i.status, i.sent_at, i.due_date, i.paid_at, i.dunning_hold_until, i.pdf_path, i.amount_open, i.amount_paid,
       r.paid_e4, r.credited_e4, r.paid_last, r.currency_low AS paid_currency_low,
       r.currency_high AS paid_currency_high, r.unreadable AS payments_unreadable,
       /*include payment_state*/ AS payment_state
FROM invoices i LEFT JOIN paid r ON r.invoice_id = i.id
WHERE i.id IN (SELECT id FROM picked)
UNION ALL
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path, amount_open, amount_paid,
       NULL AS paid_e4, NULL AS credited_e4, NULL AS paid_last, NULL AS paid_currency_low,
       NULL AS paid_currency_high, NULL AS payments_unreadable, NULL AS payment_state
FROM picked
WHERE id IS NULL
