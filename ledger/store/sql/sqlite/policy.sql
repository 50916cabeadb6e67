-- The ledger's own policy (ledger.store.policy): its newest policy_set event, and who owns the ledger.

-- name: latest
-- The newest policy_set event of the policy's own sequence (job_id, operation given).
SELECT id, detail, hash, mac FROM events WHERE job_id = ? AND operation = ? AND kind = 'policy_set'
ORDER BY seq DESC LIMIT 1;

-- name: owner
-- Who owns the ledger, and whether this connection is that owner. A SQLite file has no owner the database knows:
-- its OS account does (ledger.store.policy.owner asks the file system and does not run this). No row, as for an
-- owner PostgreSQL cannot find.
SELECT NULL AS tableowner, 0 AS is_owner WHERE 0;
