-- A moved row that carried a statement (docs/design.md, "Statements"): the statement's rows,
-- its own included, now name it by its new key.
UPDATE dueflow_ledger SET statement_key = :new_key WHERE statement_key = :old_key
