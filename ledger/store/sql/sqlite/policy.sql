-- The ledger's own policy (ledger.store.policy): its policy_set events.

-- name: every
-- Every policy_set event of the policy's own sequence (job_id, operation given), oldest first.
SELECT id, detail, hash, mac FROM events WHERE job_id = ? AND operation = ? AND kind = 'policy_set'
ORDER BY seq;
