-- The unnested candidates of a reservation are materialised; at the default 4 MB a night
-- of 100,000 candidates spills them to a temporary file.
SET LOCAL work_mem = '64MB'
