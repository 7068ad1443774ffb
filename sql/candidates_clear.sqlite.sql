DELETE FROM candidate
