-- The reads of the overview's "how the system copes" figures (ledger.store.coping): holds begun and ended in a
-- recent window, and every hold ended so far. Events of a kind in a window are found by events_kind_at (kind, at),
-- each kind's window on its own (the fenced subquery keeps the planner from joining the kinds, of which it cannot
-- know how few there are, against a scan of every event; the kinds are unnested from an array, which the planner
-- counts as 10 rows where a JSON array's elements count 100, so a window's read is not costed past JIT's threshold:
-- JIT took 55 of 60 ms on a 1M-event ledger); the hold an ending ended by events_job_kind (job_id, operation, kind, id); the totals come from the kept event_tallies (a few rows), never from a scan of the events.
-- Only reads.

-- name: begun
-- The events that put a job on hold (kinds in a JSON array; into held from another state) at since <= time < until,
-- counted per hour from since (0 = the first hour). Parameters: since, the hold kinds, since, until.
SELECT floor((h.at - %s) / 3600)::integer AS hour, COUNT(*)
FROM unnest(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) AS k(kind)
CROSS JOIN LATERAL (SELECT e.at FROM events e WHERE e.kind = k.kind AND e.at >= %s AND e.at < %s
                      AND e.to_state = 'held' AND COALESCE(e.from_state, '') <> 'held' OFFSET 0) h
GROUP BY hour;

-- name: ended
-- The events that ended a hold (kinds in a JSON array; out of held) at since <= time < until, oldest first: when,
-- whether reclaim itself wrote it (1) or a person (0), and when the job's latest hold before it began (NULL when the
-- ledger has none). Parameters: the hold kinds, the ending kinds, since, until.
WITH hold_kinds AS (SELECT kind FROM unnest(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) AS k(kind))
SELECT d.at, CASE WHEN d.actor = 'reclaim' THEN 1 ELSE 0 END, h.at
FROM unnest(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) AS k(kind)
CROSS JOIN LATERAL (SELECT e.id, e.at, e.actor, e.job_id, e.operation FROM events e
                    WHERE e.kind = k.kind AND e.at >= %s AND e.at < %s
                      AND e.from_state = 'held' AND e.to_state <> 'held' OFFSET 0) d
LEFT JOIN LATERAL (SELECT x.at FROM hold_kinds hk
                   CROSS JOIN LATERAL (SELECT y.id, y.at FROM events y
                                       WHERE y.job_id = d.job_id AND y.operation = d.operation AND y.kind = hk.kind
                                         AND y.id < d.id AND y.to_state = 'held'
                                         AND COALESCE(y.from_state, '') <> 'held'
                                       ORDER BY y.id DESC LIMIT 1) x
                   ORDER BY x.id DESC LIMIT 1) h ON true
ORDER BY d.id;

-- name: ended_total
-- Every hold ended so far, by whether reclaim itself ended it (1) or a person (0): from the kept tallies.
SELECT system, COALESCE(SUM(n), 0) FROM event_tallies
WHERE from_state = 'held' AND to_state NOT IN ('', 'held')
GROUP BY system;
