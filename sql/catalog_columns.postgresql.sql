-- `dueflow sources init`: every column of every table, view, materialized view and foreign
-- table of :schema (or, without one, of each schema of the search path, in its order) —
-- dueflow's own tables aside —, with its type (a domain's base type) and whether it is part
-- of the primary key. Reads the catalog only.
SELECT n.nspname AS schema, c.relname AS relation,
       CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'm' THEN 'materialized view' ELSE 'foreign table' END AS kind,
       a.attname AS column_name,
       CASE WHEN t.typtype = 'd' THEN base.typname ELSE t.typname END AS type_name,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY(i.indkey)) AS primary_key
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_catalog.pg_type base ON base.oid = t.typbasetype
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND NOT c.relispartition
  AND c.relname NOT LIKE 'dueflow\_%'
  AND (n.nspname = :schema OR (CAST(:schema AS text) IS NULL AND n.nspname = ANY(current_schemas(false))))
ORDER BY array_position(current_schemas(false), n.nspname), n.nspname, c.relname, a.attnum
