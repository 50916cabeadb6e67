-- The ledger's own policy (ledger.store.policy): its newest policy_set event.

-- name: latest
-- The newest policy_set event of the policy's own sequence (job_id, operation given).
SELECT id, detail, hash, mac FROM events WHERE job_id = ? AND operation = ? AND kind = 'policy_set'
ORDER BY seq DESC LIMIT 1;
