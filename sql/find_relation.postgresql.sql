-- Where a source relation is: a table, view, materialized view, foreign or partitioned
-- table named :name in :schema, or, without a schema, in each schema of the search path,
-- in search-path order (more than one is ambiguous: the caller refuses to guess). The
-- name as written first, then as PostgreSQL folds an unquoted one (lower case).
SELECT n.nspname AS schema, c.relname AS relation,
       CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END AS kind,
       c.relname = :name AS exact
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND (c.relname = :name OR c.relname = lower(:name))
  AND (n.nspname = :schema OR (CAST(:schema AS text) IS NULL AND n.nspname = ANY(current_schemas(false))))
ORDER BY c.relname = :name DESC, array_position(current_schemas(false), n.nspname)
