-- SQLite flavour of catalog_columns.postgresql.sql: the tables and views of the database
-- (one schema), their columns, declared types and primary key; dueflow's own tables aside.
SELECT NULL AS schema, m.name AS relation, m.type AS kind, p.name AS column_name, p.type AS type_name,
       p.pk > 0 AS primary_key
FROM sqlite_master m
JOIN pragma_table_info(m.name) p
WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'
  AND m.name NOT LIKE 'dueflow\_%' ESCAPE '\'
ORDER BY m.name, p.cid
