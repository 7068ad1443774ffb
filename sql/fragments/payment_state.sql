-- What an invoice's open amount is read from, as one text: its payments (r: payments_of)
-- and its own amount_open or amount_paid (i: the invoice). The extract reads it with the
-- invoice; the reservation reads it again from the live rows and reserves only when it is
-- the same: an invoice paid, in part or in full, after the extract gets no reminder that
-- night (docs/design.md, "What the client still owes").
COALESCE(r.state, '') || '|' || COALESCE(CAST(i.amount_open AS text), '') || '|'
  || COALESCE(CAST(i.amount_paid AS text), '')
