-- SQLite flavour of find_relation.postgresql.sql: one schema (main), tables and views;
-- SQLite compares names without regard to case.
SELECT NULL AS schema, name AS relation, type AS kind, name = :name AS exact
FROM sqlite_master
WHERE type IN ('table', 'view') AND lower(name) = lower(:name)
