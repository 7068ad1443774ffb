-- The names of the types a probe of a source returned (cursor.description gives OIDs).
SELECT oid, typname FROM pg_catalog.pg_type WHERE oid = ANY(CAST(:oids AS oid[]))
