-- The figures of `reclaim metrics` (ledger.store.metrics): counts from the ledger's own tables and events. Only reads.

-- name: last_event_id
-- The newest event's id (NULL on an empty ledger).
SELECT MAX(id) FROM events;

-- name: held_figures
-- Per operation with held jobs: how many, the earliest hold, and how many are past their due time at the given time.
SELECT operation, COUNT(*), MIN(held_at), SUM(CASE WHEN due_at IS NOT NULL AND due_at < ? THEN 1 ELSE 0 END)
FROM jobs WHERE state = 'held' GROUP BY operation;

-- name: event_tallies
-- The events among after < id <= upto (the primary key's range) of the tallied kinds (a JSON array) or that moved a
-- job into a terminal state (a JSON array of states), counted per operation, kind, states and whether the system
-- actor (the first parameter) wrote them; with how many of the send outcomes (a JSON array of kinds) were recorded
-- from the outcome journal, and how many duplicate sends asked for a cancel. "journaled" is found by a text search,
-- not a JSON parse, so a scan of every outcome event stays cheap: the detail is written by detail_json (json's
-- default spacing), and inside a JSON string a quote is escaped, so '"journaled": ' can only be a key.
SELECT operation, kind, from_state, to_state, CASE WHEN actor = ? THEN 1 ELSE 0 END AS sys, COUNT(*),
       SUM(CASE WHEN kind IN (SELECT value FROM json_each(?)) AND instr(detail, '"journaled": ') > 0
           THEN 1 ELSE 0 END),
       SUM(CASE WHEN kind = 'duplicate_send' AND json_extract(detail, '$.cancel') IS NOT NULL THEN 1 ELSE 0 END)
FROM events
WHERE id > ? AND id <= ?
  AND (kind IN (SELECT value FROM json_each(?))
       OR (to_state IN (SELECT value FROM json_each(?)) AND (from_state IS NULL OR from_state <> to_state)))
GROUP BY operation, kind, from_state, to_state, sys;

-- name: event_count_between
-- The events with after < id <= upto (a range of the primary key).
SELECT COUNT(*) FROM events WHERE id > ? AND id <= ?;

-- name: fenced_writes
SELECT operation, event, COUNT(*) FROM fenced_writes GROUP BY operation, event;

-- name: outbox_states
SELECT channel, state, COUNT(*) FROM outbox GROUP BY channel, state;

-- name: webhook_deliveries
-- Verified deliveries per type and whether they became evidence.
SELECT COALESCE(type, ''), CASE WHEN evidence_id IS NULL THEN 0 ELSE 1 END AS recorded, COUNT(*)
FROM webhook_deliveries GROUP BY COALESCE(type, ''), recorded;
