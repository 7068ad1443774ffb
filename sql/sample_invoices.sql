-- `dueflow demo`'s sample invoices, unless already there.
INSERT INTO invoices (id, client_id, number, amount, currency, status, sent_at, due_date, paid_at)
VALUES (:id, :client_id, :number, :amount, :currency, :status, :sent_at, :due_date, NULL)
ON CONFLICT (id) DO NOTHING
