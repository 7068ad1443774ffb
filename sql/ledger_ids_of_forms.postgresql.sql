-- The ids the ledger knows, for one job, whose form apart from spelling (subject_form,
-- tasks/core/keys.py id_forms) is one of tonight's new rows': a source whose ids changed
-- spelling between nights (tasks/core/rekeying.py). Probes of dueflow_ledger_subject_forms.
SELECT DISTINCT l.subject_id, l.subject_form
FROM dueflow_ledger l
WHERE l.job = :job AND l.subject_form = ANY(CAST(:forms AS text[]))
