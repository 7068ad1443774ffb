-- The pairs of ids an operator said are different subjects (`dueflow rekey --keep-apart`):
-- a new id of the same form as one the ledger knows is not a changed spelling of it.
SELECT job, old_id, new_id FROM dueflow_id_changes WHERE decision = 'apart'
