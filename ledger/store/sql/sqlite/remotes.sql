-- When each remote last answered (ledger.store.remotes, `reclaim remotes`). Only reads.

-- name: last_verified_webhooks
-- Per remote (named in the evidence's detail by the webhook receiver), when its newest verified webhook delivery
-- that became evidence was received.
SELECT json_extract(e.detail, '$.remote'), MAX(w.received_at)
FROM webhook_deliveries w JOIN evidence e ON e.id = w.evidence_id
WHERE json_extract(e.detail, '$.remote') IS NOT NULL
GROUP BY json_extract(e.detail, '$.remote');

-- name: last_evidence
-- Per operation, its newest evidence: when, and from which source.
SELECT e.operation, e.at, e.source
FROM evidence e
JOIN (SELECT operation, MAX(id) AS id FROM evidence WHERE operation IS NOT NULL GROUP BY operation) newest
  ON newest.id = e.id;
