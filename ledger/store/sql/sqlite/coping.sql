-- The reads of the overview's "how the system copes" figures (ledger.store.coping): holds begun and ended in a
-- recent window, and every hold ended so far. Events of a kind in a window are found by events_kind_at (kind, at);
-- the hold an ending ended by events_job_kind (job_id, operation, kind, id); the totals come from the kept
-- event_tallies (a few rows), never from a scan of the events. Only reads.

-- name: begun
-- The events that put a job on hold (kinds in a JSON array; into held from another state) at since <= time < until,
-- counted per hour from since (0 = the first hour). Parameters: since, the hold kinds, since, until.
SELECT CAST((at - ?) / 3600 AS INTEGER) AS hour, COUNT(*)
FROM events
WHERE kind IN (SELECT value FROM json_each(?)) AND at >= ? AND at < ?
  AND to_state = 'held' AND COALESCE(from_state, '') <> 'held'
GROUP BY hour;

-- name: ended
-- The events that ended a hold (kinds in a JSON array; out of held) at since <= time < until, oldest first: when,
-- whether reclaim itself wrote it (1) or a person (0), and when the job's latest hold before it began (NULL when the
-- ledger has none). Parameters: the hold kinds, the ending kinds, since, until.
SELECT d.at, CASE WHEN d.actor = 'reclaim' THEN 1 ELSE 0 END, h.at
FROM events d
LEFT JOIN events h ON h.id = (SELECT MAX(x.id) FROM events x
                              WHERE x.job_id = d.job_id AND x.operation = d.operation
                                AND x.kind IN (SELECT value FROM json_each(?)) AND x.id < d.id
                                AND x.to_state = 'held' AND COALESCE(x.from_state, '') <> 'held')
WHERE d.kind IN (SELECT value FROM json_each(?)) AND d.at >= ? AND d.at < ?
  AND d.from_state = 'held' AND d.to_state <> 'held'
ORDER BY d.id;

-- name: ended_total
-- Every hold ended so far, by whether reclaim itself ended it (1) or a person (0): from the kept tallies.
SELECT system, COALESCE(SUM(n), 0) FROM event_tallies
WHERE from_state = 'held' AND to_state NOT IN ('', 'held')
GROUP BY system;
