-- The reads `reclaim verify` makes (ledger.store.verify): rows as they are stored. The chain is walked whole, by id
-- (streamed); the counts and the webhook probe answer in one row or a few.

-- name: chain
-- Every event, by id: every column its hash covers, its links, its seal and MAC.
SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, prev_hash, hash, seal, mac
FROM events ORDER BY id;

-- name: job_count
SELECT COUNT(*) FROM jobs;

-- name: quota_table
-- The quota counters as stored, zeros included.
SELECT operation, day, used FROM quota_usage;

-- name: state_counters
-- The trigger-kept counters as stored.
SELECT state, n FROM state_counts;

-- name: states_counted
-- The jobs per state, counted in the jobs table itself (a full scan).
SELECT state, COUNT(*) FROM jobs GROUP BY state;

-- name: webhook_without_delivery
-- The first evidence a webhook brought whose delivery row is gone.
SELECT e.id, e.ref FROM evidence e LEFT JOIN webhook_deliveries w ON w.webhook_id = e.ref
WHERE e.source = 'webhook' AND e.ref IS NOT NULL AND w.webhook_id IS NULL ORDER BY e.id LIMIT 1;

-- name: outbox_ids
-- Every notification's stable id (evt-EVENT-CHANNEL): what the events that notified name.
SELECT event_id FROM outbox;

-- name: deliveries_since
-- The webhook deliveries received at or after a time, with what their proofs cover, by time.
SELECT webhook_id, received_at, signature, type, evidence_id, proof FROM webhook_deliveries
WHERE received_at >= %s ORDER BY received_at, webhook_id;
