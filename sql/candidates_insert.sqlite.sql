INSERT OR IGNORE INTO candidate (key, subject_id, subject_form, cycle, step, step_rank, recipient,
                                 previous_by, payment_state)
VALUES (:key, :subject_id, :subject_form, :cycle, :step, :step_rank, :recipient, :previous_by, :payment_state)
