-- The reads `reclaim verify` makes (ledger.store.verify): rows as they are stored. The chain is walked whole, by id
-- (streamed); the counts and the webhook probe answer in one row or a few.

-- name: chain
-- Every event, by id: every column its hash covers, its links, its seal and MAC.
SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, prev_hash, hash, seal, mac
FROM events ORDER BY id;

-- name: newest_link
-- The newest event as the chain stores it (no row on an empty ledger): what opening a ledger reads back.
SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, prev_hash, hash, seal, mac
FROM events ORDER BY id DESC LIMIT 1;

-- name: chain_after
-- The events after one (by id), as `chain` reads them: what `verify --since` walks.
SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, prev_hash, hash, seal, mac
FROM events WHERE id > %s ORDER BY id;

-- name: nth_event
-- The event number N (1 for the oldest) in id order: its id, hash, time and seal (none past the last).
SELECT id, hash, at, seal FROM events ORDER BY id LIMIT 1 OFFSET %s;

-- name: policy_through
-- Every policy_set event up to an id, by id (events_kind_at finds them without a scan of every event).
SELECT id, at, detail, hash, mac FROM events WHERE kind = 'policy_set' AND id <= %s ORDER BY id;

-- name: job_steps_sealed
-- One job's events as `job_events` reads them, by sequence number.
SELECT id, job_id, operation, seq, kind, from_state, to_state, epoch, seal FROM events
WHERE job_id = %s AND operation = %s ORDER BY seq;

-- name: quota_events_from
-- The reservations and releases at or after a time, as the quota replay reads them (events_kind_at serves it).
SELECT id, at, operation, kind, to_state, detail, seal FROM events
WHERE kind IN ('reserve', 'release') AND at >= %s ORDER BY id;

-- name: event_count
SELECT COUNT(*) FROM events;

-- name: job_count
SELECT COUNT(*) FROM jobs;

-- name: quota_table
-- The quota counters as stored, zeros included.
SELECT operation, day, used FROM quota_usage;

-- name: job_counters
-- The jobs per operation and state the events' trigger keeps, as stored (zeros included).
SELECT operation, state, n FROM job_counts;

-- name: jobs_counted
-- The jobs per operation and state, counted in the jobs table itself (a full scan).
SELECT operation, state, COUNT(*) FROM jobs GROUP BY operation, state;

-- name: event_tallies_kept
-- The events per operation, kind, step and writer the events' trigger keeps, as stored.
SELECT operation, kind, from_state, to_state, system, n, journaled, cancelled FROM event_tallies;

-- name: event_tallies_counted
-- The same tallies counted from the events themselves (a full scan), the way the trigger counts one event.
SELECT operation, kind, COALESCE(from_state, ''), COALESCE(to_state, ''),
       CASE WHEN actor = 'reclaim' THEN 1 ELSE 0 END, COUNT(*), SUM(reclaim_journaled(detail)),
       SUM(reclaim_cancelled(kind, detail))
FROM events GROUP BY 1, 2, 3, 4, 5;

-- name: webhook_without_delivery
-- The first evidence a webhook brought whose delivery row is gone.
SELECT e.id, e.ref FROM evidence e LEFT JOIN webhook_deliveries w ON w.webhook_id = e.ref
WHERE e.source = 'webhook' AND e.ref IS NOT NULL AND w.webhook_id IS NULL ORDER BY e.id LIMIT 1;

-- name: deliveries_since
-- The webhook deliveries received at or after a time, with what their proofs cover, by time.
SELECT webhook_id, received_at, signature, type, evidence_id, proof FROM webhook_deliveries
WHERE received_at >= %s ORDER BY received_at, webhook_id;

-- name: record_pass
-- A verify that found nothing wrong: when, over what (full or since), through which head, run by whom.
INSERT INTO verify_passes (at, scope, events, head, actor) VALUES (%s, %s, %s, %s, %s);

-- name: last_passes
-- The newest passing verify of each scope.
SELECT p.scope, p.at, p.events, p.head, p.actor FROM verify_passes p
WHERE p.id = (SELECT MAX(q.id) FROM verify_passes q WHERE q.scope = p.scope);
