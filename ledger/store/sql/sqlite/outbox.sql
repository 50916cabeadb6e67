-- The notification outbox (ledger.store.outbox): the table outbox, one row per notification and channel; the
-- states are read by outbox_state (state, created_at). A row's move is composed by the module (its columns vary).

-- name: insert
-- Queue one notification pending, due at once.
INSERT INTO outbox (event_id, channel, job_id, operation, kind, body, state, created_at, updated_at,
next_try_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?);

-- name: sending
-- Every row claimed and not settled, in no set order.
SELECT event_id, channel, updated_at FROM outbox WHERE state = 'sending';

-- name: due
-- The pending rows due at a time, the oldest first (by creation, then id).
SELECT event_id, channel, body FROM outbox WHERE state = 'pending' AND next_try_at <= ?
ORDER BY created_at, event_id LIMIT ?;

-- name: listed
-- Uncertain rows first, then sending, then pending, then the rest; newest first within each.
SELECT * FROM outbox ORDER BY CASE state WHEN 'uncertain' THEN 0 WHEN 'sending' THEN 1
WHEN 'pending' THEN 2 ELSE 3 END, created_at DESC, event_id DESC LIMIT ?;

-- name: get
SELECT * FROM outbox WHERE event_id = ?;
