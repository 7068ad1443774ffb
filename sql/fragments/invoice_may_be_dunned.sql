-- An invoice row that may take part in dunning tonight: not paid, and not in a status
-- that ends dunning (draft, paid, void). Unknown statuses come along to be quarantined.
paid_at IS NULL AND (status IS NULL OR status NOT IN ('draft', 'paid', 'void'))
