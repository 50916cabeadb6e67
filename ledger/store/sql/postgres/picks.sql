-- The picks table (ledger.store.picks): which worker picked which due job until when. The due jobs are read by the
-- state indexes, picks by their primary key (job_id, operation) or by worker (picks_worker). Rows another
-- transaction holds are skipped (SKIP LOCKED), so no two pickers ever wait on (or deadlock with) each other.

-- name: any_due
-- One reserving job, unsent, due at the given time, after the cursor (created_at, job_id, operation), and not
-- live-picked by a worker other than the given one (the latest committed rows, outside a transaction: no lock).
-- Parameters: now, *cursor, worker, now.
SELECT 1 FROM jobs j
WHERE j.state = 'reserving' AND j.send_started_at IS NULL
  AND (j.next_try_at IS NULL OR j.next_try_at <= %s) AND (j.created_at, j.job_id, j.operation) > (%s, %s, %s)
  AND NOT EXISTS (SELECT 1 FROM picks p WHERE p.job_id = j.job_id AND p.operation = j.operation
                  AND p.worker <> %s AND p.picked_until > %s)
LIMIT 1;

-- name: due_batch
-- At most `limit` jobs as any_due finds them, oldest first (creation, then key), locked, skipping the rows another
-- transaction holds. Parameters: now, *cursor, worker, now, limit.
SELECT j.* FROM jobs j
WHERE j.state = 'reserving' AND j.send_started_at IS NULL
  AND (j.next_try_at IS NULL OR j.next_try_at <= %s) AND (j.created_at, j.job_id, j.operation) > (%s, %s, %s)
  AND NOT EXISTS (SELECT 1 FROM picks p WHERE p.job_id = j.job_id AND p.operation = j.operation
                  AND p.worker <> %s AND p.picked_until > %s)
ORDER BY j.created_at, j.job_id, j.operation LIMIT %s FOR UPDATE OF j SKIP LOCKED;

-- name: renew
-- Every pick a worker holds made to last until the given time, but those another transaction holds. Parameters:
-- until, worker.
UPDATE picks SET picked_until = %s
WHERE (job_id, operation) IN (SELECT job_id, operation FROM picks WHERE worker = %s FOR UPDATE SKIP LOCKED);

-- name: release_own
-- Every pick a worker holds, deleted, but those another transaction holds.
DELETE FROM picks
WHERE (job_id, operation) IN (SELECT job_id, operation FROM picks WHERE worker = %s FOR UPDATE SKIP LOCKED);

-- name: release_lapsed
-- Every pick of any worker lapsed at the given time, deleted, but those another transaction holds.
DELETE FROM picks
WHERE (job_id, operation) IN (SELECT job_id, operation FROM picks WHERE picked_until <= %s FOR UPDATE SKIP LOCKED);

-- name: picked_by_other
-- A pick of the job by a worker other than the given one, live at the given time.
SELECT 1 FROM picks WHERE job_id = %s AND operation = %s AND worker <> %s AND picked_until > %s;

-- name: drop
DELETE FROM picks WHERE job_id = %s AND operation = %s;
