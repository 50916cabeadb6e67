-- The append-only events table (ledger.store.events): the one append, a job's history and its latest event of a
-- kind (index events_job_kind or the per-job sequence), the events after a cursor and the newest (the primary key),
-- the chain's head, every event's step for replay.

-- name: next_seq_and_head
-- The job's next event sequence number, the audit chain's head hash (NULL on an empty ledger), and the heads of the
-- evidence and fenced-write chains the event's seal names: one round trip.
SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = %s AND operation = %s),
(SELECT hash FROM events ORDER BY id DESC LIMIT 1),
(SELECT hash FROM evidence ORDER BY id DESC LIMIT 1),
(SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1);

-- name: insert_event
-- One event's row, through the one function the operators' and workers' roles may append with (they hold no
-- INSERT on events); its id comes back as `id` (the cursor's lastrowid).
SELECT reclaim_append_event(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) AS id;

-- name: last_send_started
SELECT MAX(at) FROM events WHERE job_id = %s AND operation = %s AND kind = 'send_started';

-- name: of_kind
SELECT actor, at, detail FROM events WHERE job_id = %s AND operation = %s AND kind = %s ORDER BY id;

-- name: duplicate_count
SELECT COUNT(*) FROM events WHERE kind = 'duplicate_send';

-- name: hash_of
SELECT hash FROM events WHERE id = %s;

-- name: job_events
SELECT * FROM events WHERE job_id = %s AND operation = %s ORDER BY seq;

-- name: events_after
-- The follow cursor.
SELECT * FROM events WHERE id > %s ORDER BY id LIMIT %s;

-- name: latest_events
SELECT * FROM events ORDER BY id DESC LIMIT %s;

-- name: last_event_id
SELECT MAX(id) FROM events;

-- name: newest_hash
-- The newest event's id and hash (no row on an empty ledger).
SELECT id, hash FROM events ORDER BY id DESC LIMIT 1;

-- name: event_count
-- The events in the ledger, from the kept tallies (verify recounts them).
SELECT COALESCE(SUM(n), 0) FROM event_tallies;

-- name: latest_of_kind
SELECT * FROM events WHERE job_id = %s AND operation = %s AND kind = %s AND id > %s ORDER BY id DESC LIMIT 1;

-- name: triage_work
-- A job's findings, remote queries and dismissed candidates after an event id.
SELECT actor, kind FROM events WHERE job_id = %s AND operation = %s AND id > %s
AND kind IN ('finding', 'remote_query', 'candidate_dismissed') ORDER BY id;

-- name: hold_detail
-- The detail of the event that last put the job on hold (from another state, or as it was created).
SELECT detail FROM events WHERE job_id = %s AND operation = %s AND to_state = 'held'
AND (from_state IS NULL OR from_state <> 'held') ORDER BY id DESC LIMIT 1;

-- name: steps
-- Every event as a replay step (the whole table), by job key then sequence number.
SELECT id, job_id, operation, seq, kind, from_state, to_state, epoch FROM events
ORDER BY job_id, operation, seq;

-- name: job_steps
SELECT kind, from_state, to_state, epoch FROM events WHERE job_id = %s AND operation = %s ORDER BY seq;

-- name: authorising
-- The job's two newest reservations and releases (what authorised its current attempt, and the one before).
SELECT id, actor, kind, detail, hash, mac FROM events WHERE job_id = %s AND operation = %s
AND kind IN ('reserve', 'release') ORDER BY id DESC LIMIT 2;

-- name: triage_between
-- A job's findings, remote queries and dismissed candidates between two event ids, with their proofs.
SELECT id, actor, kind, detail, hash, mac FROM events WHERE job_id = %s AND operation = %s AND id > %s AND id < %s
AND kind IN ('finding', 'remote_query', 'candidate_dismissed') ORDER BY id;
