-- Every id of the contracts and of the invoices, as the night reads them (the source
-- projections): what `dueflow rekey` compares with the ledger's subjects.
SELECT 'renewal' AS job, id FROM contracts WHERE id IS NOT NULL
UNION ALL
SELECT 'dunning' AS job, id FROM invoices WHERE id IS NOT NULL
