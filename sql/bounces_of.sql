-- The bounce reports recorded for some keys (`dueflow invoices --id`, `dueflow bounces`).
SELECT key, kind, status_code, diagnostic, recipient, seen_at, source, settled_at
FROM dueflow_bounces
WHERE :key IS NULL OR key = :key
ORDER BY seen_at, report_id
