-- The picks table (ledger.store.picks): which worker picked which due job until when. The due jobs are read by the
-- state indexes, picks by their primary key (job_id, operation) or by worker (picks_worker). On SQLite a writer's
-- BEGIN IMMEDIATE already serialises the pickers: no row is locked.

-- name: any_due
-- One reserving job, unsent, due at the given time, after the cursor (created_at, job_id, operation), and not
-- live-picked by a worker other than the given one. Parameters: now, *cursor, worker, now.
SELECT 1 FROM jobs j
WHERE j.state = 'reserving' AND j.send_started_at IS NULL
  AND (j.next_try_at IS NULL OR j.next_try_at <= ?) AND (j.created_at, j.job_id, j.operation) > (?, ?, ?)
  AND NOT EXISTS (SELECT 1 FROM picks p WHERE p.job_id = j.job_id AND p.operation = j.operation
                  AND p.worker <> ? AND p.picked_until > ?)
LIMIT 1;

-- name: due_batch
-- At most `limit` jobs as any_due finds them, oldest first (creation, then key). Parameters: now, *cursor, worker,
-- now, limit.
SELECT j.* FROM jobs j
WHERE j.state = 'reserving' AND j.send_started_at IS NULL
  AND (j.next_try_at IS NULL OR j.next_try_at <= ?) AND (j.created_at, j.job_id, j.operation) > (?, ?, ?)
  AND NOT EXISTS (SELECT 1 FROM picks p WHERE p.job_id = j.job_id AND p.operation = j.operation
                  AND p.worker <> ? AND p.picked_until > ?)
ORDER BY j.created_at, j.job_id, j.operation LIMIT ?;

-- name: renew
-- Every pick a worker holds made to last until the given time. Parameters: until, worker.
UPDATE picks SET picked_until = ? WHERE worker = ?;

-- name: release_own
-- Every pick a worker holds, deleted.
DELETE FROM picks WHERE worker = ?;

-- name: release_lapsed
-- Every pick of any worker lapsed at the given time, deleted.
DELETE FROM picks WHERE picked_until <= ?;

-- name: picked_by_other
-- A pick of the job by a worker other than the given one, live at the given time.
SELECT 1 FROM picks WHERE job_id = ? AND operation = ? AND worker <> ? AND picked_until > ?;

-- name: drop
DELETE FROM picks WHERE job_id = ? AND operation = ?;
