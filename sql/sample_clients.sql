-- `dueflow demo`'s sample clients, unless already there.
INSERT INTO clients (id, name, email, locale, notes, dunning_paused)
VALUES (:id, :name, :email, :locale, :notes, :paused)
ON CONFLICT (id) DO NOTHING
