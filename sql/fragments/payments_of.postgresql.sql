-- PostgreSQL flavour of payments_of.sqlite.sql: the same columns and the same `state`;
-- received_at is a date already (the projection reads a timestamp in the business zone),
-- an amount is its text (the projection's), read as numeric only where it is a number.
SELECT v.invoice_id,
       SUM(CASE WHEN v.units > 0 THEN v.units END) AS paid_e4,
       SUM(CASE WHEN v.units < 0 THEN -v.units END) AS credited_e4,
       CAST(MAX(CASE WHEN v.units > 0 THEN v.received END) AS text) AS paid_last,
       MIN(v.currency) AS currency_low,
       MAX(v.currency) AS currency_high,
       SUM(CASE WHEN v.units IS NULL OR v.received IS NULL OR v.currency IS NULL THEN 1 ELSE 0 END) AS unreadable,
       COUNT(*) || ':' || COALESCE(SUM(v.units), 0) || ':' || COALESCE(MIN(v.currency), '')
         || ':' || COALESCE(MAX(v.currency), '') AS state
FROM (SELECT p.invoice_id, CAST(p.currency AS text) AS currency,
             CASE WHEN CAST(p.amount AS text) ~ '^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*$'
                  THEN round(CAST(trim(CAST(p.amount AS text)) AS numeric) * 10000) END AS units,
             p.received_at AS received
      FROM payments p
      WHERE p.invoice_id IN (SELECT invoice_id FROM payments_wanted)) v
WHERE v.received IS NULL OR v.received <= CAST(:as_of AS date)
GROUP BY v.invoice_id
