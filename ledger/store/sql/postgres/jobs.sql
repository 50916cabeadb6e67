-- The jobs table (ledger.store.jobs): the fenced writes' chain, a job by its key, handle or idempotency key, the
-- held ones, counts, and the pages a worker's pass reads. Served by the primary key or an index unless said.

-- name: last_fenced_write_hash
-- The hash at the head of the chain of refused stale writes.
SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1;

-- name: insert_fenced_write
INSERT INTO fenced_writes (at, job_id, operation, actor, event, epoch, detail, prev_hash, hash)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id;

-- name: idem_key_of
SELECT idem_key FROM jobs WHERE job_id = %s AND operation = %s;

-- name: held_on_target
-- The first held job on a target, the one a new reservation there is blocked by (index jobs_held_target).
SELECT job_id, operation FROM jobs WHERE target = %s AND state = 'held' ORDER BY held_at, job_id, operation LIMIT 1;

-- name: projections
-- Every job's state, epoch and attempt (the whole table).
SELECT job_id, operation, state, epoch, attempt FROM jobs;

-- name: handle_owner
SELECT job_id, operation FROM jobs WHERE handle = %s LIMIT 1;

-- name: job_with_handle
SELECT * FROM jobs WHERE handle = %s LIMIT 1;

-- name: state_of
SELECT state FROM jobs WHERE job_id = %s AND operation = %s;

-- name: state_and_epoch
SELECT state, epoch FROM jobs WHERE job_id = %s AND operation = %s;

-- name: find_job
SELECT * FROM jobs WHERE job_id = %s AND operation = %s;

-- name: operations_of
SELECT operation FROM jobs WHERE job_id = %s ORDER BY operation;

-- name: held_jobs
SELECT * FROM jobs WHERE state = 'held' ORDER BY held_at, created_at, job_id, operation LIMIT %s;

-- name: state_counts
-- Jobs per state, from the counters the events' trigger keeps (a few rows).
SELECT state, SUM(n) FROM job_counts GROUP BY state;

-- name: held_by_operation
SELECT operation, COUNT(*) FROM jobs WHERE state = 'held' GROUP BY operation;

-- name: operation_counts
-- Jobs per operation and state, from the kept counters (only the pairs with a job).
SELECT operation, state, n FROM job_counts WHERE n <> 0;

-- name: fenced_write_count
SELECT COUNT(*) FROM fenced_writes;

-- name: fenced_writes_for
SELECT * FROM fenced_writes WHERE job_id = %s AND operation = %s ORDER BY id;

-- name: find_by_idem_key
SELECT * FROM jobs WHERE idem_key = %s LIMIT 1;

-- name: submitted_with_handle
-- One page of a pass's polls, after a keyset (created_at, job_id, operation).
SELECT * FROM jobs WHERE state = 'submitted' AND handle IS NOT NULL
AND (created_at, job_id, operation) > (%s, %s, %s) ORDER BY created_at, job_id, operation LIMIT %s;

-- name: count_submitted
SELECT COUNT(*) FROM jobs WHERE state = 'submitted';

-- name: done_jobs
SELECT * FROM jobs WHERE state = 'done' ORDER BY updated_at, job_id, operation;

-- name: stale_sends
SELECT job_id, operation FROM jobs WHERE state = 'reserving' AND send_started_at IS NOT NULL
AND send_started_at <= %s AND (lease_until IS NULL OR lease_until <= %s) ORDER BY created_at, job_id, operation;

-- name: count_due
SELECT COUNT(*) FROM jobs WHERE state = 'reserving' AND send_started_at IS NULL
AND (next_try_at IS NULL OR next_try_at <= %s);
