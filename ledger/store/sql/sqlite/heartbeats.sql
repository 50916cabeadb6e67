-- The workers' heartbeats (ledger.store.heartbeats): the table worker_heartbeats, one row per worker. The columns
-- are read and written in the order of ledger.store.heartbeats.COLUMNS.

-- name: upsert
-- Insert a worker's row, or replace every column but its id.
INSERT INTO worker_heartbeats (worker_id, host, pid, version, kind, interval_s, started_at, pass_started_at,
pass_ended_at, last_pass_at, passes, report, error, running, stopped_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (worker_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
kind = excluded.kind, interval_s = excluded.interval_s, started_at = excluded.started_at,
pass_started_at = excluded.pass_started_at, pass_ended_at = excluded.pass_ended_at,
last_pass_at = excluded.last_pass_at, passes = excluded.passes, report = excluded.report, error = excluded.error,
running = excluded.running, stopped_at = excluded.stopped_at, updated_at = excluded.updated_at;

-- name: prune
-- Rows written last before a time and stopped, or before an earlier time whatever they say (a killed process).
DELETE FROM worker_heartbeats WHERE updated_at < ? AND (running = 0 OR updated_at < ?);

-- name: running
-- The newest rows of workers marked running (by their last write, then worker id), at most as many as given.
SELECT worker_id, host, pid, version, kind, interval_s, started_at, pass_started_at, pass_ended_at, last_pass_at,
passes, report, error, running, stopped_at, updated_at
FROM worker_heartbeats WHERE running = 1 ORDER BY updated_at DESC, worker_id LIMIT ?;

-- name: newest
-- The newest rows (by their last write, then worker id), running or not.
SELECT worker_id, host, pid, version, kind, interval_s, started_at, pass_started_at, pass_ended_at, last_pass_at,
passes, report, error, running, stopped_at, updated_at
FROM worker_heartbeats ORDER BY updated_at DESC, worker_id LIMIT ?;

-- name: last_pass_at
SELECT MAX(last_pass_at) FROM worker_heartbeats;
