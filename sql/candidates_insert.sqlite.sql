INSERT OR IGNORE INTO candidate (key, subject_id, subject_form, cycle, step, step_rank, recipient,
                                 previous_by)
VALUES (:key, :subject_id, :subject_form, :cycle, :step, :step_rank, :recipient, :previous_by)
