-- The reads of `reclaim report` (ledger.store.report): holds, releases, remote queries and quota days in a time
-- window. Events of a kind in a window are found by events_kind_at (kind, at); a hold's decision and a release's
-- next outcome by events_job_kind. Only reads.

-- name: holds
-- Every event of a hold kind (a JSON array) at since <= time < until, oldest first: the held reason and cause its
-- detail gives, and the job's next event that moved it out of held (its decision, if any: who, and the reason or
-- note its detail gives). Parameters: the hold kinds, since, until. Each kind's window is read by events_kind_at on
-- its own (the fenced subquery keeps the planner from joining the kinds, of which it cannot know how few there are,
-- against a scan of every event).
SELECT h.id, h.at, h.job_id, h.operation, h.kind, (h.detail::jsonb ->> 'held_reason'),
       (h.detail::jsonb ->> 'cause'), d.id, d.at, d.kind, d.actor,
       COALESCE((d.detail::jsonb ->> 'reason'), (d.detail::jsonb ->> 'note'))
FROM jsonb_array_elements_text(%s::jsonb) AS k(kind)
CROSS JOIN LATERAL (SELECT * FROM events e WHERE e.kind = k.kind AND e.at >= %s AND e.at < %s OFFSET 0) h
LEFT JOIN LATERAL (SELECT x.id, x.at, x.kind, x.actor, x.detail FROM events x
                   WHERE x.job_id = h.job_id AND x.operation = h.operation AND x.id > h.id
                     AND x.from_state = 'held' AND x.to_state <> 'held'
                   ORDER BY x.id LIMIT 1) d ON true
ORDER BY h.id;

-- name: releases
-- Every release at since <= time < until, oldest first, with the job's next event that moved it out of reserving
-- (the next attempt's send outcome, if any).
SELECT r.id, r.at, r.job_id, r.operation, r.from_state, r.actor, n.kind, n.to_state, n.at
FROM events r
LEFT JOIN events n ON n.id = (SELECT MIN(x.id) FROM events x WHERE x.job_id = r.job_id AND x.operation = r.operation
                              AND x.id > r.id AND x.from_state = 'reserving' AND x.to_state <> 'reserving')
WHERE r.kind = 'release' AND r.at >= %s AND r.at < %s
ORDER BY r.id;

-- name: queries
-- The remote queries (events of the given kind) at since <= time < until, counted per operation, the remote state
-- the query recorded ('error' when none) and whether the remote could be asked at all ('true' unless the snapshot
-- says).
SELECT operation, COALESCE((detail::jsonb ->> 'remote_state'), 'error'),
       COALESCE((detail::jsonb #>> '{snapshot,asked}'), 'true'), COUNT(*)
FROM events
WHERE kind = %s AND at >= %s AND at < %s
GROUP BY operation, COALESCE((detail::jsonb ->> 'remote_state'), 'error'),
         COALESCE((detail::jsonb #>> '{snapshot,asked}'), 'true');

-- name: quota_days
-- The reservations counted per operation and day, for the days first .. last (YYYY-MM-DD) inclusive.
SELECT operation, day, used FROM quota_usage WHERE day >= %s AND day <= %s ORDER BY day, operation;
