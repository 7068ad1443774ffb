-- `dueflow demo`'s sample contracts, unless already there.
INSERT INTO contracts (id, vendor, title, amount, currency, renewal_date, notify_email, status)
VALUES (:id, :vendor, :title, :amount, :currency, :renewal_date, :notify_email, :status)
ON CONFLICT (id) DO NOTHING
