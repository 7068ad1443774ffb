-- SQLite flavour of ledger_ids_of_forms.postgresql.sql.
SELECT DISTINCT l.subject_id, l.subject_form
FROM dueflow_ledger l
WHERE l.job = :job AND l.subject_form IN (SELECT value FROM json_each(:forms))
