-- Paused remotes (ledger.store.remote_pauses): the table remote_pauses, one row per paused remote, by its name.

-- name: paused_remotes
-- Every paused remote, in the order they were paused.
SELECT * FROM remote_pauses ORDER BY paused_at, remote;

-- name: pause
-- A remote paused (remote, paused_at, reason, error, job_id, operation, probe_at); when it is paused already, only
-- its next probe, its last error and its count of refusals move. Returns the refusals counted.
INSERT INTO remote_pauses (remote, paused_at, reason, error, job_id, operation, probe_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (remote) DO UPDATE SET probe_at = excluded.probe_at, refusals = remote_pauses.refusals + 1,
    error = excluded.error
RETURNING refusals;

-- name: unpause
-- A remote's pause deleted, returned as it was.
DELETE FROM remote_pauses WHERE remote = %s RETURNING *;

-- name: is_paused
SELECT 1 FROM remote_pauses WHERE remote = %s;
