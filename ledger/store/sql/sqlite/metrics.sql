-- The figures of `reclaim metrics` (ledger.store.metrics): counts from the ledger's own tables and events. Only reads.

-- name: held_figures
-- Per operation with held jobs: how many, the earliest hold, and how many are past their due time at the given time.
SELECT operation, COUNT(*), MIN(held_at), SUM(CASE WHEN due_at IS NOT NULL AND due_at < ? THEN 1 ELSE 0 END)
FROM jobs WHERE state = 'held' GROUP BY operation;

-- name: event_tallies
-- The events per operation, kind, step and whether the system actor wrote them, with how many were recorded from the
-- outcome journal and how many duplicate sends asked for a cancel: the kept tallies (a few rows), not the events.
SELECT operation, kind, from_state, to_state, system, n, journaled, cancelled FROM event_tallies;

-- name: fenced_writes
SELECT operation, event, COUNT(*) FROM fenced_writes GROUP BY operation, event;

-- name: outbox_states
SELECT channel, state, COUNT(*) FROM outbox GROUP BY channel, state;

-- name: webhook_deliveries
-- Verified deliveries per type and whether they became evidence.
SELECT COALESCE(type, ''), CASE WHEN evidence_id IS NULL THEN 0 ELSE 1 END AS recorded, COUNT(*)
FROM webhook_deliveries GROUP BY COALESCE(type, ''), recorded;
