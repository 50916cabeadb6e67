-- What names the database however it is reached (ledger.store.postgres: the host's outcome journal is named after
-- it): the server's system identifier, fixed when its cluster was made, and the database's oid, fixed when the
-- database was made (a rename keeps it).

-- name: database
SELECT (SELECT system_identifier FROM pg_control_system()), oid FROM pg_database WHERE datname = current_database();
