-- What the remote says (ledger.store.evidence): the tables evidence, evidence_handled, webhook_deliveries,
-- webhook_refusals and foreign_interactions.

-- name: last_hash
-- The hash at the head of the evidence chain.
SELECT hash FROM evidence ORDER BY id DESC LIMIT 1;

-- name: insert
-- One piece of evidence, chained to the one before.
INSERT INTO evidence (at, source, idem_key, attempt, handle, remote_state, job_id, operation, ref, detail,
prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id;

-- name: for_idem_key
SELECT * FROM evidence WHERE idem_key = %s ORDER BY id;

-- name: for_idem_key_attempt
SELECT * FROM evidence WHERE idem_key = %s AND attempt = %s ORDER BY id;

-- name: for_handle
SELECT * FROM evidence WHERE handle = %s ORDER BY id;

-- name: for_handle_source
SELECT * FROM evidence WHERE handle = %s AND source = %s ORDER BY id;

-- name: get
SELECT * FROM evidence WHERE id = %s;

-- name: latest_id
SELECT COALESCE(MAX(id), 0) FROM evidence;

-- name: mark_handled
-- What a pass did with a piece of evidence; the first outcome recorded stays.
INSERT INTO evidence_handled (evidence_id, at, outcome, record) VALUES (%s, %s, %s, %s)
ON CONFLICT (evidence_id) DO NOTHING;

-- name: unhandled
-- Webhook evidence for a known job that no pass has acted on, oldest first.
SELECT e.* FROM evidence e LEFT JOIN evidence_handled h ON h.evidence_id = e.id
WHERE h.evidence_id IS NULL AND e.source = 'webhook' AND e.job_id IS NOT NULL ORDER BY e.id LIMIT %s;

-- name: unattributed_oldest
-- Webhook evidence that names no job and that no pass has looked at, oldest first.
SELECT e.* FROM evidence e LEFT JOIN evidence_handled h ON h.evidence_id = e.id
WHERE h.evidence_id IS NULL AND e.source = 'webhook' AND e.job_id IS NULL ORDER BY e.id LIMIT %s;

-- name: unattributed_newest
-- The same, newest first.
SELECT e.* FROM evidence e LEFT JOIN evidence_handled h ON h.evidence_id = e.id
WHERE h.evidence_id IS NULL AND e.source = 'webhook' AND e.job_id IS NULL ORDER BY e.id DESC LIMIT %s;

-- name: orphans
-- Evidence that names no job, awaiting attribution or left orphan by a pass (not attributed, not foreign), newest
-- first.
SELECT e.*, h.outcome AS handled_outcome FROM evidence e
LEFT JOIN evidence_handled h ON h.evidence_id = e.id
WHERE e.job_id IS NULL AND (h.outcome IS NULL OR (h.outcome NOT ILIKE 'attributed%%'
AND h.outcome NOT ILIKE 'foreign%%'))
ORDER BY e.id DESC LIMIT %s;

-- name: orphans_since
-- Orphan webhook evidence since a time whose owner nobody could read (the two patterns: the outcomes that say so),
-- oldest first.
SELECT e.*, h.outcome AS handled_outcome, h.record AS handled_record FROM evidence e
LEFT JOIN evidence_handled h ON h.evidence_id = e.id
WHERE e.job_id IS NULL AND e.source = 'webhook' AND e.at >= %s
AND (h.evidence_id IS NULL OR h.record IS NOT NULL OR h.outcome ILIKE %s OR h.outcome ILIKE %s)
ORDER BY e.id LIMIT %s;

-- name: delivery
-- A recorded delivery: what its proof covers, then the proof.
SELECT webhook_id, received_at, signature, type, evidence_id, proof FROM webhook_deliveries WHERE webhook_id = %s;

-- name: record_delivery
INSERT INTO webhook_deliveries (webhook_id, received_at, signature, type, evidence_id, proof)
VALUES (%s, %s, %s, %s, %s, %s);

-- name: count_refusal
INSERT INTO webhook_refusals (reason, n) VALUES (%s, %s)
ON CONFLICT (reason) DO UPDATE SET n = webhook_refusals.n + excluded.n;

-- name: refusal_counts
SELECT reason, n FROM webhook_refusals ORDER BY reason;

-- name: register_foreign
-- A foreign interaction with its first delivery; one already registered has this delivery counted.
INSERT INTO foreign_interactions (interaction_id, remote, first_seen, last_seen, deliveries, labels,
evidence_id) VALUES (%s, %s, %s, %s, 1, %s, %s) ON CONFLICT (interaction_id) DO UPDATE SET
last_seen = excluded.last_seen, deliveries = foreign_interactions.deliveries + 1;

-- name: count_foreign_delivery
UPDATE foreign_interactions SET last_seen = %s, deliveries = deliveries + 1 WHERE interaction_id = %s
RETURNING interaction_id;

-- name: prune_foreign
DELETE FROM foreign_interactions WHERE last_seen < %s;

-- name: foreign_oldest_seen
SELECT MIN(last_seen) FROM foreign_interactions;

-- name: foreign_tally
SELECT COUNT(*), COALESCE(SUM(deliveries), 0), MAX(last_seen) FROM foreign_interactions;

-- name: handled_ids
-- Every piece of evidence a pass has recorded acting on.
SELECT evidence_id FROM evidence_handled;
