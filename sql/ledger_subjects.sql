-- Every subject the ledger knows, per job, with its form apart from spelling (migration
-- 0008): what `dueflow rekey` compares with the source's ids.
SELECT DISTINCT job, subject_id, subject_form FROM dueflow_ledger WHERE subject_form IS NOT NULL
