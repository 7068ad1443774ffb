-- reserve_plan for sources whose ids are not text (an integer, uuid or numeric id, read
-- as text: docs/your-data.md): comparing them casts the source's id, which a plain index
-- on it cannot serve, so hash joins stay allowed — one pass over the source rather than a
-- scan per candidate. `dueflow check --sources` prints the expression index that lets the
-- re-checks probe instead. Merge joins and JIT stay off, as in reserve_plan.
SELECT set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true),
       set_config('work_mem', '64MB', true)
