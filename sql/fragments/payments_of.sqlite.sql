-- What was paid and credited on each invoice of `payments_wanted` (invoice_id) up to the
-- business date :as_of, summed by the database in the read that needs it (docs/design.md,
-- "What the client still owes"). Amounts are summed exactly, as integers of 10^-4 (no
-- currency has more decimals); a payment is a positive amount, a credit note a negative
-- one. A row whose amount is not a number, or that has no currency or no readable date,
-- is counted in `unreadable` (its invoice is quarantined, never guessed). `state` is what
-- the reservation compares with the extract: a payment recorded in between changes it.
-- SQLite: a date is its first ten characters, as written (a plain YYYY-MM-DD).
SELECT v.invoice_id,
       SUM(CASE WHEN v.units > 0 THEN v.units END) AS paid_e4,
       SUM(CASE WHEN v.units < 0 THEN -v.units END) AS credited_e4,
       MAX(CASE WHEN v.units > 0 THEN v.received END) AS paid_last,
       MIN(v.currency) AS currency_low,
       MAX(v.currency) AS currency_high,
       SUM(CASE WHEN v.units IS NULL OR v.received IS NULL OR v.currency IS NULL THEN 1 ELSE 0 END) AS unreadable,
       COUNT(*) || ':' || COALESCE(SUM(v.units), 0) || ':' || COALESCE(MIN(v.currency), '')
         || ':' || COALESCE(MAX(v.currency), '') AS state
FROM (SELECT p.invoice_id, CAST(p.currency AS TEXT) AS currency,
             CASE WHEN typeof(p.amount) IN ('integer', 'real')
                    OR (typeof(p.amount) = 'text' AND trim(p.amount) GLOB '*[0-9]*'
                        AND trim(p.amount) NOT GLOB '*[^0-9.+-]*' AND trim(p.amount) NOT GLOB '?*[+-]*'
                        AND trim(p.amount) NOT GLOB '*.*.*')
                  THEN CAST(round(CAST(trim(p.amount) AS REAL) * 10000) AS INTEGER) END AS units,
             CASE WHEN date(substr(p.received_at, 1, 10)) = substr(p.received_at, 1, 10)
                  THEN substr(p.received_at, 1, 10) END AS received
      FROM payments p
      WHERE p.invoice_id IN (SELECT invoice_id FROM payments_wanted)) v
WHERE v.received IS NULL OR v.received <= :as_of
GROUP BY v.invoice_id
