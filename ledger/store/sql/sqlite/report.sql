-- The reads of `reclaim report` (ledger.store.report): holds, releases, remote queries and quota days in a time
-- window. Events of a kind in a window are found by events_kind_at (kind, at); a hold's decision and a release's
-- next outcome by events_job_kind. Only reads.

-- name: holds
-- Every event of a hold kind (a JSON array) at since <= time < until, oldest first: the held reason and cause its
-- detail gives, and the job's next event that moved it out of held (its decision, if any: who, and the reason or
-- note its detail gives). Parameters: the hold kinds, since, until.
SELECT h.id, h.at, h.job_id, h.operation, h.kind, json_extract(h.detail, '$.held_reason'),
       json_extract(h.detail, '$.cause'), d.id, d.at, d.kind, d.actor,
       COALESCE(json_extract(d.detail, '$.reason'), json_extract(d.detail, '$.note'))
FROM events h
LEFT JOIN events d ON d.id = (SELECT MIN(x.id) FROM events x WHERE x.job_id = h.job_id AND x.operation = h.operation
                              AND x.id > h.id AND x.from_state = 'held' AND x.to_state <> 'held')
WHERE h.kind IN (SELECT value FROM json_each(?)) AND h.at >= ? AND h.at < ?
ORDER BY h.id;

-- name: releases
-- Every release at since <= time < until, oldest first, with the job's next event that moved it out of reserving
-- (the next attempt's send outcome, if any).
SELECT r.id, r.at, r.job_id, r.operation, r.from_state, r.actor, n.kind, n.to_state, n.at
FROM events r
LEFT JOIN events n ON n.id = (SELECT MIN(x.id) FROM events x WHERE x.job_id = r.job_id AND x.operation = r.operation
                              AND x.id > r.id AND x.from_state = 'reserving' AND x.to_state <> 'reserving')
WHERE r.kind = 'release' AND r.at >= ? AND r.at < ?
ORDER BY r.id;

-- name: queries
-- The remote queries (events of the given kind) at since <= time < until, counted per operation, the remote state
-- the query recorded ('error' when none) and whether the remote could be asked at all (1 unless the snapshot says).
SELECT operation, COALESCE(json_extract(detail, '$.remote_state'), 'error'),
       COALESCE(json_extract(detail, '$.snapshot.asked'), 1), COUNT(*)
FROM events
WHERE kind = ? AND at >= ? AND at < ?
GROUP BY operation, COALESCE(json_extract(detail, '$.remote_state'), 'error'),
         COALESCE(json_extract(detail, '$.snapshot.asked'), 1);

-- name: quota_days
-- The reservations counted per operation and day, for the days first .. last (YYYY-MM-DD) inclusive.
SELECT operation, day, used FROM quota_usage WHERE day >= ? AND day <= ? ORDER BY day, operation;
