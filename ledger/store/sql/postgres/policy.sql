-- The ledger's own policy (ledger.store.policy): its newest policy_set event, and who owns the ledger.

-- name: latest
-- The newest policy_set event of the policy's own sequence (job_id, operation given).
SELECT id, detail, hash, mac FROM events WHERE job_id = %s AND operation = %s AND kind = 'policy_set'
ORDER BY seq DESC LIMIT 1;

-- name: owner
-- Who owns the ledger (the role that owns the events table of the current schema), and whether this connection's
-- role is that owner or a superuser. No row when the table is not found.
SELECT t.tableowner, t.tableowner = current_user OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
FROM pg_tables t WHERE t.tablename = 'events' AND t.schemaname = current_schema();
